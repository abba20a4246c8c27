// Every route that changes state through the admin API or the portal, declared once: the
// action it records, the object it touches and where that object's id is. audited-routes.ts
// wraps exactly these; a POST, PUT, PATCH or DELETE under /admin or /portal that is in
// neither list below stops the gateway at boot, so a new route cannot go unaudited.
// (test/audit/declarations.test.ts also checks both lists against the API reference.)

export type ChangeMethod = 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/** Where the changed object's id is found. */
export type IdSource =
  /** A path parameter of the route. */
  | { readonly param: string }
  /** Path parameters joined by `/` (an object named by two parts, as a budget by scope and id). */
  | { readonly params: readonly string[] }
  /** One object the gateway has a single one of (its configuration). */
  | { readonly fixed: string }
  /** A field of the JSON reply (a create through the admin API). */
  | { readonly reply: string }
  /** The first group of a pattern on the redirect's Location (a create through the portal). */
  | { readonly location: RegExp }

export interface AuditedRoute {
  readonly method: ChangeMethod
  /** As registered (find-my-way syntax). */
  readonly path: string
  /** `<object type>.<verb>`. */
  readonly action: string
  /** A key of audit/subjects.ts. */
  readonly subject: string
  readonly id: IdSource
}

export interface NotAChange {
  readonly method: ChangeMethod
  readonly path: string
  readonly reason: string
}

const id = { param: 'id' }
const username = { param: 'username' }
const budget = { params: ['scope', 'id'] }

export const AUDITED_ROUTES: readonly AuditedRoute[] = [
  // The admin API (and the CLI, which calls it).
  { method: 'POST', path: '/admin/keys', action: 'key.create', subject: 'key', id: { reply: 'id' } },
  { method: 'PATCH', path: '/admin/keys/:id', action: 'key.update', subject: 'key', id },
  { method: 'POST', path: '/admin/keys/:id/rotate', action: 'key.rotate', subject: 'key', id },
  { method: 'DELETE', path: '/admin/keys/:id', action: 'key.revoke', subject: 'key', id },
  { method: 'POST', path: '/admin/users', action: 'user.create', subject: 'user', id: { reply: 'username' } },
  { method: 'PATCH', path: '/admin/users/:username', action: 'user.update', subject: 'user', id: username },
  { method: 'DELETE', path: '/admin/users/:username', action: 'user.delete', subject: 'user', id: username },
  {
    method: 'DELETE',
    path: '/admin/queue/requests/:id',
    action: 'queue_request.cancel',
    subject: 'queue_request',
    id,
  },
  { method: 'PUT', path: '/admin/budgets/:scope/:id', action: 'budget.set', subject: 'budget', id: budget },
  { method: 'DELETE', path: '/admin/budgets/:scope/:id', action: 'budget.clear', subject: 'budget', id: budget },
  { method: 'POST', path: '/admin/webhooks', action: 'webhook.create', subject: 'webhook', id: { reply: 'id' } },
  { method: 'PATCH', path: '/admin/webhooks/:id', action: 'webhook.update', subject: 'webhook', id },
  { method: 'DELETE', path: '/admin/webhooks/:id', action: 'webhook.delete', subject: 'webhook', id },
  {
    method: 'POST',
    path: '/admin/webhooks/:id/rotate-secret',
    action: 'webhook.rotate_secret',
    subject: 'webhook',
    id,
  },
  {
    method: 'POST',
    path: '/admin/webhooks/:id/deliveries/:delivery/replay',
    action: 'webhook_delivery.replay',
    subject: 'webhook_delivery',
    id: { param: 'delivery' },
  },
  { method: 'POST', path: '/admin/reload', action: 'config.reload', subject: 'config', id: { fixed: 'config' } },
  {
    method: 'DELETE',
    path: '/admin/cache',
    action: 'response_cache.purge',
    subject: 'response_cache',
    id: { fixed: 'response_cache' },
  },
  // The portal.
  {
    method: 'POST',
    path: '/portal/keys',
    action: 'key.create',
    subject: 'key',
    id: { location: /^\/portal\/keys\/([^/?#]+)\/secret$/ },
  },
  { method: 'POST', path: '/portal/keys/:id/rotate', action: 'key.rotate', subject: 'key', id },
  { method: 'POST', path: '/portal/keys/:id/revoke', action: 'key.revoke', subject: 'key', id },
  { method: 'POST', path: '/portal/admin/keys/:id/tier', action: 'key.update', subject: 'key', id },
  {
    method: 'POST',
    path: '/portal/admin/users',
    action: 'user.create',
    subject: 'user',
    id: { location: /^\/portal\/admin\/users\?created=([^&#]+)$/ },
  },
  {
    method: 'POST',
    path: '/portal/admin/users/:username/disable',
    action: 'user.disable',
    subject: 'user',
    id: username,
  },
  {
    method: 'POST',
    path: '/portal/admin/users/:username/enable',
    action: 'user.enable',
    subject: 'user',
    id: username,
  },
]

export const NOT_CHANGES: readonly NotAChange[] = [
  {
    method: 'POST',
    path: '/admin/webhooks/:id/test',
    reason:
      'Sends a webhook.test event to the endpoint; the endpoint and every setting stay as they were. Its delivery is in the webhook history.',
  },
  {
    method: 'POST',
    path: '/portal/sign-in',
    reason:
      'Starts a browser session of the person signing in; no key, user or setting changes. The access log has it, and failed attempts count in the login throttle.',
  },
  {
    method: 'POST',
    path: '/portal/sign-out',
    reason: 'Ends the signed-in browser session; nothing else changes.',
  },
]
