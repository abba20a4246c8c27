// The error table (src/errors.ts) pinned, as fastify's test/internals/errors.test.js pins
// its codes: every entry is written out here, so adding, dropping, renaming or changing one
// fails this test until it is updated on purpose. An entry's name is the stable part (the
// access log, metrics and code key on it): a name is never reused for another meaning, and
// a dropped one stays dropped. OpenAI's `type` and `code` mirror OpenAI's own answers and
// may be shared (four refusals of an API key are all `invalid_api_key`); the name tells
// them apart, in the access log too (the last test).
import { readdirSync, readFileSync } from 'node:fs'
import { STATUS_CODES } from 'node:http'
import { join, resolve } from 'node:path'
import t from 'tap'
import { ERRORS, GatewayError, type BodyShape, type ErrorName } from '../src/errors.ts'
import { startTollgate } from './helpers/gateway.ts'
import { pollUntil } from './helpers/poll.ts'

type Row = readonly [status: number, type: string | null, code: string | null, body: BodyShape]

/** name: [status, OpenAI type, OpenAI code, body shape]; type and code are null where the body is not OpenAI's. */
const PINNED: Readonly<Record<string, Row>> = {
  invalid_json: [400, 'invalid_request_error', 'invalid_json', 'openai'],
  invalid_body: [400, 'invalid_request_error', 'invalid_body', 'openai'],
  missing_field: [400, 'invalid_request_error', 'missing_required_parameter', 'openai'],
  invalid_multipart: [400, 'invalid_request_error', 'invalid_multipart', 'openai'],
  bad_header: [400, 'invalid_request_error', 'invalid_header', 'openai'],
  bad_http: [400, 'invalid_request_error', 'invalid_http_request', 'openai'],
  webhook_url_refused: [400, 'invalid_request_error', 'invalid_webhook_url', 'openai'],
  background_not_metered: [400, 'invalid_request_error', 'unsupported_parameter', 'openai'],
  untranslatable_feature: [400, 'invalid_request_error', 'unsupported_parameter', 'openai'],
  guardrail_blocked: [400, 'invalid_request_error', 'guardrail_blocked', 'openai'],
  missing_api_key: [401, 'invalid_request_error', 'invalid_api_key', 'openai'],
  invalid_api_key: [401, 'invalid_request_error', 'invalid_api_key', 'openai'],
  expired_api_key: [401, 'authentication_error', 'invalid_api_key', 'openai'],
  revoked_api_key: [401, 'authentication_error', 'invalid_api_key', 'openai'],
  admin_unauthorized: [401, 'authentication_error', 'invalid_admin_token', 'openai'],
  model_not_allowed: [403, 'permission_error', 'model_not_allowed', 'openai'],
  endpoint_not_allowed: [403, 'permission_error', 'endpoint_not_allowed', 'openai'],
  portal_forbidden: [403, 'permission_error', 'csrf_failed', 'openai'],
  admin_disabled: [403, 'permission_error', 'admin_disabled', 'openai'],
  unknown_route: [404, 'invalid_request_error', 'unknown_url', 'openai'],
  model_not_found: [404, 'invalid_request_error', 'model_not_found', 'openai'],
  resource_not_found: [404, 'invalid_request_error', 'not_found', 'openai'],
  conflict: [409, 'invalid_request_error', 'conflict', 'openai'],
  config_restart_required: [409, 'invalid_request_error', 'config_restart_required', 'openai'],
  config_invalid: [422, 'invalid_request_error', 'config_invalid', 'openai'],
  config_reload_failed: [500, 'server_error', 'config_reload_failed', 'openai'],
  request_timeout: [408, 'invalid_request_error', 'request_timeout', 'openai'],
  client_read_timeout: [408, 'invalid_request_error', 'client_read_timeout', 'openai'],
  method_not_allowed: [405, 'invalid_request_error', 'method_not_allowed', 'openai'],
  body_too_large: [413, 'invalid_request_error', 'request_too_large', 'openai'],
  unsupported_media_type: [415, 'invalid_request_error', 'unsupported_media_type', 'openai'],
  expectation_failed: [417, 'invalid_request_error', 'expectation_failed', 'openai'],
  headers_too_large: [431, 'invalid_request_error', 'headers_too_large', 'openai'],
  rate_limit_requests: [429, 'requests', 'rate_limit_exceeded', 'openai'],
  rate_limit_tokens: [429, 'tokens', 'rate_limit_exceeded', 'openai'],
  upstream_capacity: [429, 'requests', 'upstream_capacity_exceeded', 'openai'],
  insufficient_quota: [429, 'insufficient_quota', 'insufficient_quota', 'openai'],
  budget_exhausted: [429, 'insufficient_quota', 'insufficient_quota', 'openai'],
  budget_reserved: [429, 'requests', 'rate_limit_exceeded', 'openai'],
  budget_unavailable: [503, 'server_error', 'store_unavailable', 'openai'],
  auth_throttled: [429, 'requests', 'too_many_auth_failures', 'openai'],
  too_many_connections: [429, 'requests', 'too_many_connections', 'openai'],
  queue_full: [429, 'requests', 'queue_full', 'openai'],
  batch_limit: [429, 'invalid_request_error', 'batch_limit_exceeded', 'openai'],
  batch_input_invalid: [400, 'invalid_request_error', 'invalid_file', 'openai'],
  file_quota_exceeded: [429, 'insufficient_quota', 'file_quota_exceeded', 'openai'],
  internal: [500, 'server_error', 'internal_error', 'openai'],
  capability_missing: [501, 'invalid_request_error', 'not_supported', 'openai'],
  upstream_unreachable: [502, 'server_error', 'upstream_unreachable', 'openai'],
  upstream_auth_failed: [502, 'server_error', 'upstream_auth_failed', 'openai'],
  upstream_bad_response: [502, 'server_error', 'upstream_error', 'openai'],
  upstream_error_status: [502, 'server_error', 'upstream_error', 'openai'],
  store_unavailable: [503, 'server_error', 'store_unavailable', 'openai'],
  shutting_down: [503, 'server_error', 'shutting_down', 'openai'],
  guardrail_unavailable: [503, 'server_error', 'guardrail_unavailable', 'openai'],
  upstream_timeout: [504, 'server_error', 'upstream_timeout', 'openai'],
  queue_deadline: [429, 'requests', 'queue_deadline', 'openai'],
  queue_timeout: [504, 'server_error', 'queue_timeout', 'openai'],
  queue_expired: [504, 'server_error', 'queue_expired', 'openai'],
  client_closed: [499, 'invalid_request_error', 'client_closed', 'openai'],
  result_too_large: [502, 'server_error', 'result_too_large', 'openai'],
  invalid_access_token: [401, null, null, 'detail'],
  login_failed: [401, null, null, 'detail'],
  invalid_refresh_token: [401, null, null, 'detail'],
  login_throttled: [429, null, null, 'detail'],
  missing_access_token: [401, null, null, 'detail'],
  unprocessable_body: [422, null, null, 'detail'],
  rag_bad_path: [400, null, null, 'detail'],
  rag_route_forbidden: [403, null, null, 'detail'],
  rag_unknown_route: [404, null, null, 'detail'],
  rag_unknown_service: [404, null, null, 'detail'],
  rag_body_timeout: [408, null, null, 'detail'],
  rag_body_too_large: [413, null, null, 'detail'],
  rag_internal: [500, null, null, 'detail'],
  rag_service_unreachable: [502, null, null, 'detail'],
  rag_service_error_status: [502, null, null, 'detail'],
  rag_service_timeout: [504, null, null, 'detail'],
  portal_sign_in_incomplete: [400, null, null, 'page'],
  portal_sign_in_failed: [401, null, null, 'page'],
  flex_capacity: [429, 'requests', 'flex_capacity_exceeded', 'openai'],
  fair_share: [429, 'requests', 'fair_share_exceeded', 'openai'],
}

const NAMES = Object.keys(ERRORS) as ErrorName[]

t.test('the table is exactly the pinned one', async (t) => {
  t.same(NAMES.slice().sort(), Object.keys(PINNED).sort(), 'the same names: none added, dropped or renamed')
  for (const name of NAMES) {
    const spec = ERRORS[name]
    const row: Row =
      spec.body === 'openai' ? [spec.status, spec.type, spec.code, spec.body] : [spec.status, null, null, spec.body]
    t.same(row, PINNED[name], name)
  }
  t.equal(NAMES.length, Object.keys(PINNED).length, 'as many entries as pinned')
})

t.test('names are stable identifiers', async (t) => {
  for (const name of NAMES) t.match(name, /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/, `${name}: snake_case`)
})

t.test('every status is an HTTP error status', async (t) => {
  for (const name of NAMES) {
    const { status } = ERRORS[name]
    t.ok(Number.isInteger(status) && status >= 400 && status <= 599, `${name}: ${status} is a 4xx or 5xx`)
    // 499 is nginx's "client closed request", the one status outside RFC 9110 the gateway uses.
    t.ok(
      STATUS_CODES[status] !== undefined || (name === 'client_closed' && status === 499),
      `${name}: ${status} is a registered status`,
    )
  }
})

t.test("OpenAI-shaped entries have a type and a code in OpenAI's form; the others have none", async (t) => {
  for (const name of NAMES) {
    const spec = ERRORS[name]
    if (spec.body === 'openai') {
      t.match(spec.type, /^[a-z_]+$/, `${name}: type`)
      t.ok(spec.code === null || /^[a-z_]+$/.test(spec.code), `${name}: code`)
    } else {
      t.notOk('type' in spec || 'code' in spec, `${name}: no OpenAI type or code (its body is ${spec.body})`)
    }
  }
})

t.test('each entry answers in its body shape', async (t) => {
  for (const name of NAMES) {
    const spec = ERRORS[name]
    const error = new GatewayError(name)
    t.equal(error.errorName, name)
    t.equal(error.status, spec.status, `${name}: status`)
    t.equal(error.message, spec.message, `${name}: message`)
    const body = error.toBody()
    t.equal(body.detail, spec.message, `${name}: detail is the message`)
    if (spec.body === 'openai') {
      t.same(
        body,
        { error: { message: spec.message, type: spec.type, param: null, code: spec.code }, detail: spec.message },
        `${name}: OpenAI's error object and detail`,
      )
    } else {
      t.same(body, { detail: spec.message }, `${name}: detail alone`)
    }
  }
})

t.test('messages hold nothing secret-shaped', async (t) => {
  const SECRET_SHAPED: readonly RegExp[] = [
    /tg1_[A-Za-z0-9]/, // a Tollgate API key
    /\bsk-[A-Za-z0-9]/, // an OpenAI-style key
    /\badm_[A-Za-z0-9]/, // an admin token
    /eyJ[A-Za-z0-9_-]{8,}/, // a JWT
    /[A-Za-z0-9+/=_-]{32,}/, // a long token, hash or base64 run
    /-----BEGIN/, // a PEM block
  ]
  for (const name of NAMES) {
    const { message } = ERRORS[name]
    t.ok(message.length > 0 && message.length <= 200, `${name}: a short message`)
    for (const pattern of SECRET_SHAPED) t.notMatch(message, pattern, `${name}: no ${String(pattern)}`)
  }
})

t.test('every entry is produced somewhere in src (no dead entries)', async (t) => {
  // By its name written in the code ('name' or ERRORS.name), the table itself left out:
  // a search, so a name that only occurs elsewhere by chance would pass; a dead entry
  // whose name is written nowhere else does not.
  const root = resolve(import.meta.dirname, '../src')
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))
  let text = ''
  for (const file of files) {
    const source = readFileSync(join(root, file), 'utf8')
    if (file !== 'errors.ts') {
      text += source
      continue
    }
    const start = source.indexOf('export const ERRORS = {')
    const end = source.indexOf('} as const satisfies', start)
    t.ok(start >= 0 && end > start, 'the table is found in src/errors.ts')
    text += source.slice(0, start) + source.slice(end)
  }
  for (const name of NAMES)
    t.ok(text.includes(`'${name}'`) || text.includes(`ERRORS.${name}`), `${name} is produced somewhere`)
})

t.test("the access log tells a missing key from a revoked one, which OpenAI's code does not", async (t) => {
  const gw = await startTollgate()
  t.teardown(async () => {
    await gw.stop()
  })
  const { key, id } = await gw.createKey({ name: 'to revoke', tier: 'Standard4000' })
  const revoked = await fetch(`${gw.url}/admin/keys/${id}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  t.equal(revoked.status, 200, 'revoked')
  const lineOf = async (
    headers: Record<string, string>,
  ): Promise<{ code: unknown; line: Record<string, unknown> | undefined }> => {
    const res = await fetch(`${gw.url}/v2/models`, { headers })
    t.equal(res.status, 401)
    const code = ((await res.json()) as { error?: { code?: unknown } }).error?.code
    const reqId = res.headers.get('x-request-id')
    const find = (): Record<string, unknown> | undefined =>
      gw.logs().find((l) => l.msg === 'request' && l.reqId === reqId)
    const polled = await pollUntil(
      async () => find(),
      (line) => line !== undefined,
    )
    return { code, line: polled.value }
  }
  const missing = await lineOf({})
  const revokedKey = await lineOf({ authorization: `Bearer ${key}` })
  t.equal(missing.code, 'invalid_api_key', "no key: OpenAI's code")
  t.equal(revokedKey.code, 'invalid_api_key', 'a revoked key: the same OpenAI code')
  t.equal(missing.line?.error, 'missing_api_key', 'the log names the entry: missing')
  t.equal(revokedKey.line?.error, 'revoked_api_key', 'the log names the entry: revoked')
  t.not(missing.line?.error, revokedKey.line?.error, 'the two lines differ')
})
