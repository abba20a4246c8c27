// Cursor pagination as OpenAI lists do it: `after` is the id of the last object seen,
// `limit` caps the page, and `has_more` tells the SDK's auto-pager to ask again.
import { invalidRequest } from './errors.ts'
import { optionalInteger, optionalString } from './params.ts'

export interface Page<T> {
  readonly object: 'list'
  readonly data: readonly T[]
  readonly has_more: boolean
}

export function paginate<T extends { readonly id: string }>(
  ordered: readonly T[],
  query: Readonly<Record<string, unknown>>,
  limits: { readonly default: number; readonly max: number },
): Page<T> {
  const limit = optionalInteger(query, 'limit', { min: 1, max: limits.max }) ?? limits.default
  const after = optionalString(query, 'after')
  let start = 0
  if (after !== undefined) {
    const at = ordered.findIndex((item) => item.id === after)
    if (at === -1) throw invalidRequest("Invalid 'after': no object with this id in the list.", 'after')
    start = at + 1
  }
  const data = ordered.slice(start, start + limit)
  return { object: 'list', data, has_more: start + limit < ordered.length }
}
