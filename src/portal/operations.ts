// The portal's pages and forms as the API reference lists them (openapi/catalogue.ts). Kept
// apart from the routes (routes.ts), which a gateway without the portal never loads.
import type { OperationDoc } from '../openapi/operation.ts'

const TAG = 'Portal'
const PAGE = { 200: { description: 'An HTML page', contentType: 'text/html' } }
const FORM_DONE = { 303: { description: 'Done: on to the next page' } }
const DESCRIPTION =
  "A page of the key portal for a browser, signed in with a session cookie (HttpOnly, SameSite=Strict); without one it redirects (303) to /portal/sign-in. Forms carry the session's CSRF token."
const op = (
  method: 'get' | 'post',
  path: string,
  operationId: string,
  summary: string,
  responses: OperationDoc['responses'],
  pathParams?: Record<string, string>,
): OperationDoc => ({
  method,
  path,
  operationId,
  summary,
  tag: TAG,
  security: 'none',
  description: DESCRIPTION,
  responses,
  ...(pathParams === undefined ? {} : { pathParams }),
})
const KEY = { id: "The key's id (key_…); another user's key is not found." }

export const PORTAL_OPERATIONS: readonly OperationDoc[] = [
  op('get', '/portal', 'portalHome', 'The portal: on to the keys, or to sign in', { 303: { description: 'Redirect' } }),
  op('get', '/portal/sign-in', 'portalSignInPage', 'The sign-in page', PAGE),
  op('post', '/portal/sign-in', 'portalSignIn', 'Sign in with a user account (form); sets the session cookie', {
    ...FORM_DONE,
    401: { description: 'Wrong username or password (the page again)', contentType: 'text/html' },
  }),
  op(
    'post',
    '/portal/sign-out',
    'portalSignOut',
    'Sign out: the session ends; on to the sign-in page, which says so',
    FORM_DONE,
  ),
  op('get', '/portal/keys', 'portalKeys', 'My keys, a page at a time', PAGE),
  op('post', '/portal/keys', 'portalCreateKey', 'Create a key; on to the page that shows its secret once', {
    303: { description: 'Made: on to /portal/keys/{id}/secret' },
  }),
  op('get', '/portal/keys/{id}', 'portalKey', 'One key: its plan and what is left per model', PAGE, KEY),
  op(
    'get',
    '/portal/keys/{id}/secret',
    'portalKeySecret',
    'The secret a create or rotate just made, shown once to the session that made it; opened again, a page saying it is gone',
    PAGE,
    KEY,
  ),
  op(
    'post',
    '/portal/keys/{id}/rotate',
    'portalRotateKey',
    'Rotate a key with a grace for the old secret; on to the page that shows the new secret once',
    { 303: { description: 'Rotated: on to /portal/keys/{id}/secret' } },
    KEY,
  ),
  op('post', '/portal/keys/{id}/revoke', 'portalRevokeKey', 'Revoke a key (the form confirms it)', FORM_DONE, KEY),
  op('get', '/portal/usage', 'portalUsage', 'Usage per day and model, in total or of one key, over a range', PAGE),
  op('get', '/portal/usage.csv', 'portalUsageCsv', 'The same usage as CSV', {
    200: { description: 'CSV', contentType: 'text/csv' },
  }),
  op('get', '/portal/admin/keys', 'portalAdminKeys', 'Admin: every key, filtered by owner, tier, status', PAGE),
  op('post', '/portal/admin/keys/{id}/tier', 'portalAdminKeyTier', "Admin: change a key's tier", FORM_DONE, KEY),
  op('get', '/portal/admin/users', 'portalAdminUsers', 'Admin: every user', PAGE),
  op(
    'get',
    '/portal/admin/audit',
    'portalAdminAudit',
    'Admin: the audit log of changes, filtered by who, action, object and dates',
    PAGE,
  ),
  op('post', '/portal/admin/users', 'portalAdminCreateUser', 'Admin: create a user', FORM_DONE),
  op(
    'post',
    '/portal/admin/users/{username}/disable',
    'portalAdminDisableUser',
    'Admin: disable a user (their sessions end)',
    FORM_DONE,
    { username: 'The user' },
  ),
  op(
    'post',
    '/portal/admin/users/{username}/enable',
    'portalAdminEnableUser',
    'Admin: enable a user again',
    FORM_DONE,
    { username: 'The user' },
  ),
  op(
    'get',
    '/portal/assets/{name}',
    'portalAsset',
    "The portal's stylesheet and script",
    { 200: { description: 'CSS or JavaScript', contentType: 'text/css' } },
    { name: 'portal.css or portal.js' },
  ),
]
