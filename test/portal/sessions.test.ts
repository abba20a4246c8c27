// Portal sessions on a moved clock: idle and absolute expiry, a new password or a disabled
// user ending them, the throttle shared with the RAG login, and only a hash in the store.
import t, { type Test } from 'tap'
import { AccountService } from '../../src/accounts/service.ts'
import { PortalSessions } from '../../src/portal/sessions.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import { embeddedPortalSessions } from '../../src/store/portal-sessions.ts'
import { createLoginThrottle } from '../../src/jwt/login-throttle.ts'

function setup(t: Test) {
  const stores = openEmbeddedStores(':memory:')
  const store = embeddedPortalSessions(':memory:')
  t.teardown(async () => {
    await store.close()
    await stores.close()
  })
  let clock = Date.now()
  const accounts = new AccountService({ store: stores.accounts, now: () => new Date(clock) })
  const throttle = createLoginThrottle({
    maxFailuresPerUserAddress: 2,
    maxFailuresPerAddress: 100,
    maxFailuresPerUsername: 2,
    slowdownMs: 1,
    maxSlowdownMs: 1,
    windowSeconds: 60,
    blockSeconds: 60,
  })
  const sessions = new PortalSessions({
    config: { enabled: true, sessionIdleSeconds: 60, sessionAbsoluteSeconds: 300, secureCookie: 'auto', pageSize: 50 },
    store,
    accounts,
    throttle,
    now: () => clock,
  })
  return {
    accounts,
    sessions,
    store,
    advance: (ms: number) => {
      clock += ms
    },
  }
}

t.test('idle expiry: a session used within the idle time lives on; one left alone ends', async (t) => {
  const { accounts, sessions, advance } = setup(t)
  await accounts.create({ username: 'ann', password: 'ann-password' })
  const signed = await sessions.signIn('ann', 'ann-password', '10.0.0.1')
  t.ok(signed)
  const token = signed?.token
  for (let i = 0; i < 4; i++) {
    advance(50_000)
    t.ok(await sessions.resume(token), `used after ${(i + 1) * 50} s: still signed in`)
  }
  advance(61_000)
  t.equal(await sessions.resume(token), null, 'idle for 61 s: ended')
  t.equal(await sessions.resume(token), null, 'and stays ended')
})

t.test('absolute expiry: however busy, a session ends at its end', async (t) => {
  const { accounts, sessions, advance } = setup(t)
  await accounts.create({ username: 'ann', password: 'ann-password' })
  const token = (await sessions.signIn('ann', 'ann-password', '10.0.0.1'))?.token
  let alive = 0
  for (let s = 30; s <= 330; s += 30) {
    advance(30_000)
    if (await sessions.resume(token)) alive = s
  }
  t.equal(alive, 270, 'alive until the 300 s end, not after')
})

t.test('a new password or a disabled account ends the session; the store holds only a hash', async (t) => {
  const { accounts, sessions, store, advance } = setup(t)
  await accounts.create({ username: 'ann', password: 'ann-password' })
  const first = await sessions.signIn('ann', 'ann-password', '10.0.0.1')
  t.ok(first)
  t.equal(await store.get(first?.token ?? ''), null, 'not stored under the cookie value')
  t.ok(await store.get(first?.signedIn.session.id ?? ''), 'but under its hash')
  t.not(first?.signedIn.session.id, first?.token)
  advance(1000)
  await accounts.update('ann', { password: 'ann-new-password' })
  t.equal(await sessions.resume(first?.token), null, 'a new password ends earlier sessions')
  const second = await sessions.signIn('ann', 'ann-new-password', '10.0.0.1')
  t.ok(await sessions.resume(second?.token))
  await accounts.update('ann', { disabled: true })
  t.equal(await sessions.resume(second?.token), null, 'disabled: ended')
  t.equal(await sessions.signIn('ann', 'ann-new-password', '10.0.0.1'), null, 'and cannot sign in')
  t.equal(await sessions.resume('not-a-token'), null)
  t.equal(await sessions.resume(undefined), null)
})

t.test('failed sign-ins are throttled per username and address; the user elsewhere still signs in', async (t) => {
  const { accounts, sessions } = setup(t)
  await accounts.create({ username: 'ann', password: 'ann-password' })
  t.equal(await sessions.signIn('ann', 'wrong-one', '10.0.0.1'), null)
  t.equal(await sessions.signIn('ann', 'wrong-two', '10.0.0.1'), null)
  const blocked = await sessions.signIn('ann', 'ann-password', '10.0.0.1').then(
    () => null,
    (err: unknown) => err,
  )
  t.equal(
    (blocked as { errorName?: string } | null)?.errorName,
    'login_throttled',
    'that address is blocked, right password or not',
  )
  t.ok(
    await sessions.signIn('ann', 'ann-password', '10.0.0.2'),
    'from another address: signed in (slowed, not refused)',
  )
})
