// Refusals that say what to do next (issue 37, item 18): a wrong admin token names the
// command that prints the right one and the stale copy a shell may hold; an expired key
// says when it expired.
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const gw = await startTollgate()
t.teardown(() => gw.stop())

interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string }
  readonly detail: string
}

t.test('a wrong admin token: where the right one is, and why a shell may hold a stale one', async (t) => {
  const res = await fetch(`${gw.url}/admin/keys`, { headers: { authorization: `Bearer ${gw.adminToken}x` } })
  t.equal(res.status, 401)
  const body = (await res.json()) as ErrorBody
  t.equal(body.error.code, 'invalid_admin_token')
  t.match(body.error.message, /`npx tollgate admin-token` prints it/)
  t.match(body.error.message, /TOLLGATE_ADMIN_TOKEN exported in your shell may be stale/)
  t.notMatch(body.error.message, gw.adminToken, 'the token is not in the answer')
})

t.test('an expired key: when it expired', async (t) => {
  const expiresAt = new Date(Date.now() + 1500).toISOString()
  const { key } = await gw.createKey({ tier: 'Standard4000', expires_at: expiresAt })
  const refused = await pollUntil(
    () => fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}` } }),
    (res) => res.status === 401,
    100,
    50,
  )
  t.ok(refused.met, 'refused once it expired')
  const body = (await refused.value.json()) as ErrorBody
  t.equal(body.error.code, 'invalid_api_key')
  t.equal(
    body.error.message,
    `This API key expired at ${expiresAt}. An administrator can extend it (expires_at) or issue a new one.`,
  )
  t.equal(body.detail, body.error.message)
})
