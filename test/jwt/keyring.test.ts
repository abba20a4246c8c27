// The keyring on a clock the test moves, and the verifier's cache bound: what happens at
// each step of a rotation, and how late a revocation is seen without any message.
import t, { type Test } from 'tap'
import { calculateJwkThumbprint, SignJWT } from 'jose'
import { AccountService } from '../../src/accounts/service.ts'
import { GatewayError } from '../../src/errors.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import type { Stores } from '../../src/store/ports.ts'
import { createKeyring } from '../../src/jwt/keyring.ts'
import { createSealer } from '../../src/jwt/seal.ts'
import { createAccessTokenVerifier } from '../../src/jwt/verifier.ts'

const log = createLogger('silent')
const HOUR = 3_600_000

/** In-memory stores, closed when the test ends. */
function openStores(t: Test): Stores {
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  return stores
}

/** Keyring options on the test's clock: a new key each day, hour-long tokens, keys sealed with `secret` (one character, repeated). */
const daily = (stores: Stores, secret: string, now: () => number) => ({
  store: stores.signingKeys,
  sealer: createSealer(secret.repeat(32)),
  rotationMs: 24 * HOUR,
  accessTokenTtlMs: HOUR,
  log,
  now,
})

t.test("a key's kid is its RFC 7638 thumbprint, as jose computes it", async (t) => {
  const stores = openStores(t)
  const ring = createKeyring(daily(stores, 't', () => Date.parse('2030-01-01T00:00:00Z')))
  await ring.signer()
  const keys = await stores.signingKeys.list()
  t.equal(keys.length, 1)
  for (const key of keys) t.equal(key.kid, await calculateJwkThumbprint(key.publicJwk), 'the same thumbprint')
})

t.test('rotation: a new key after the interval, the old one verifies until its successor is old enough', async (t) => {
  const stores = openStores(t)
  let clock = Date.parse('2030-01-01T00:00:00Z')
  const options = daily(stores, 's', () => clock)
  const ring = createKeyring(options)
  const first = await ring.signer()
  t.equal((await stores.signingKeys.list()).length, 1)
  t.equal((await ring.signer()).kid, first.kid, 'the same key within the interval')

  // Another instance, sharing the store, finds and uses the same key.
  const other = createKeyring(options)
  t.equal((await other.signer()).kid, first.kid)

  clock += 24 * HOUR
  const second = await ring.signer()
  t.not(second.kid, first.kid, 'rotated')
  t.ok(await other.publicKey(second.kid), 'the other instance finds the new kid on demand')
  t.ok(await ring.publicKey(first.kid), 'the old key still verifies')
  t.strictSame(
    (await ring.jwks()).keys.map((k) => k.kid),
    [first.kid, second.kid],
  )
  t.equal(
    (await other.signer()).kid,
    second.kid,
    'the other instance, due too, takes the new key rather than making one',
  )
  t.equal((await stores.signingKeys.list()).length, 2)
  await other.rotate()
  t.equal((await stores.signingKeys.list()).length, 3, 'an explicit rotation adds a key on top of the newest')

  // Concurrent rotations: one wins.
  clock += 24 * HOUR
  const [x, y] = await Promise.all([createKeyring(options).signer(), createKeyring(options).signer()])
  t.equal(x.kid, y.kid, 'two instances rotating at once agree on one key')

  // Past the retirement of all but the newest, the old ones are dropped.
  clock += 24 * HOUR + 2 * HOUR
  await ring.signer()
  const kids = (await ring.jwks()).keys.map((k) => k.kid)
  t.notOk(kids.includes(first.kid), 'the first key is gone once every token it signed has expired')
  t.equal(await ring.publicKey(first.kid), null)
})

t.test('a private key sealed with another secret cannot be used', async (t) => {
  const stores = openStores(t)
  const options = { store: stores.signingKeys, rotationMs: HOUR, accessTokenTtlMs: HOUR, log }
  await createKeyring({ ...options, sealer: createSealer('a'.repeat(32)) }).signer()
  await t.rejects(createKeyring({ ...options, sealer: createSealer('b'.repeat(32)) }).signer())
  const stored = JSON.stringify(await stores.signingKeys.list())
  t.notMatch(stored, /"d":|PRIVATE/, 'no private key in the clear')
})

t.test('without any message, a revocation elsewhere is seen within revocationCacheMs', async (t) => {
  const stores = openStores(t)
  let clock = Date.now()
  const ring = createKeyring(daily(stores, 'k', () => clock))
  const verifier = createAccessTokenVerifier({
    config: { issuer: 'tollgate', audience: 'tollgate-rag', revocationCacheMs: 500 },
    keyring: ring,
    sessions: stores.sessions,
    accounts: stores.accounts,
    now: () => clock,
  })
  const account = await new AccountService({ store: stores.accounts }).create({
    username: 'cached',
    password: 'cached password',
  })
  const session = {
    id: 'ses_cached',
    userId: account.id,
    username: 'cached',
    createdAt: account.sessionsValidFrom,
    expiresAt: new Date(clock + HOUR).toISOString(),
    revokedAt: null,
  }
  await stores.sessions.create(session, 'h')
  const signer = await ring.signer()
  const iat = Math.floor(clock / 1000)
  const token = await new SignJWT({ sid: session.id })
    .setProtectedHeader({ alg: 'EdDSA', kid: signer.kid, typ: 'at+jwt' })
    .setIssuer('tollgate')
    .setAudience('tollgate-rag')
    .setSubject(account.id)
    .setIssuedAt(iat)
    .setExpirationTime(iat + 600)
    .setJti('j')
    .sign(signer.privateKey)
  t.equal((await verifier.verify(token)).username, 'cached')
  await stores.sessions.revoke(session.id, new Date(clock))
  clock += 400
  t.equal((await verifier.verify(token)).username, 'cached', 'still cached 400 ms later (no message came)')
  clock += 101
  const error = await verifier.verify(token).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof GatewayError && error.status === 401, 'refused once the entry is older than 500 ms')
})

t.test('the timed check: one at a time, so an outage is one warning and one recovery line', async (t) => {
  // During a Redis outage a check waits on the store for seconds; checks begun on every tick
  // regardless ended out of order (one begun before the outage succeeded after the first
  // failure), which logged the outage as two (test/e2e/redis-outage-timers under load).
  const stores = openStores(t)
  const lines: Array<{ msg: string }> = []
  const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) })
  let clock = Date.parse('2030-01-01T00:00:00Z')
  let release: (() => void) | undefined
  let inFlight = 0
  let mostInFlight = 0
  let listFails = false
  const counted = async <T>(call: () => Promise<T>): Promise<T> => {
    mostInFlight = Math.max(mostInFlight, ++inFlight)
    try {
      return await call()
    } finally {
      inFlight--
    }
  }
  const store = {
    list: () =>
      counted(async () => {
        if (listFails) throw new Error('Connection is closed.')
        return stores.signingKeys.list()
      }),
    addIfLatest: (key: Parameters<typeof stores.signingKeys.addIfLatest>[0], latest: string | null) =>
      counted(async () => {
        if (release === undefined && clock > Date.parse('2030-01-01T00:00:00Z'))
          await new Promise<void>((resolve) => (release = resolve))
        return stores.signingKeys.addIfLatest(key, latest)
      }),
    remove: (kid: string) => counted(() => stores.signingKeys.remove(kid)),
  }
  // rotationMs 400: a check every 100 ms of real time.
  const ring = createKeyring({ ...daily(stores, 'c', () => clock), store, rotationMs: 400, log: logger })
  t.teardown(() => ring.close())
  await ring.start()
  mostInFlight = 0
  clock += 400 // the next check rotates, and waits on the store
  t.ok(await eventuallyTrue(() => release !== undefined), 'a check waits on the store')
  listFails = true
  // Five check periods pass while it waits: no other check may begin (absence takes time).
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.equal(mostInFlight, 1, 'no check began while one waited')
  release?.()
  t.ok(await eventuallyTrue(() => lines.some((l) => l.msg.startsWith('JWT signing keys: check failed'))), 'it fails')
  listFails = false
  t.ok(await eventuallyTrue(() => lines.some((l) => l.msg.startsWith('JWT signing keys: check succeeded again'))))
  t.equal(lines.filter((l) => l.msg.startsWith('JWT signing keys: check failed')).length, 1, 'one warning')
})

async function eventuallyTrue(condition: () => boolean): Promise<boolean> {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 25))
  return condition()
}
