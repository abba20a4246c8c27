// Ids that name the user whose slot they live on (issue #25). A session, a refresh token or a
// portal cookie is presented with nothing else, and the store must find its slot without a
// global lookup: so the id carries the user, `<head>.<user id>`, the way a stored queue
// request's id names its shard. The head is the random (or hashed) part and holds no '.'.
//
// An id without a user is of the layout before #25 (it lives in `{tg}`) and stays readable
// there until it expires. A user id outside [\w-] (never one the accounts service makes,
// `usr_<hex>`) is not put in an id: such ids keep the old layout rather than a cookie or a
// token that would need escaping.

const USER = /^[\w-]{1,128}$/

/** `<head>.<userId>`, or `head` alone when the user id cannot be carried (see above). */
export function userScopedId(head: string, userId: string): string {
  if (head.includes('.')) throw new RangeError(`an id's head may not contain '.': ${head}`)
  return USER.test(userId) ? `${head}.${userId}` : head
}

/** The user an id names, or null for an id of the old layout. */
export function userOfId(id: string): string | null {
  const at = id.indexOf('.')
  if (at === -1) return null
  const user = id.slice(at + 1)
  return USER.test(user) ? user : null
}

/** `head`, naming the user `id` names (none for an id of the old layout): a hash of an id, say. */
export function sameUserAs(id: string, head: string): string {
  const user = userOfId(id)
  return user === null ? head : userScopedId(head, user)
}
