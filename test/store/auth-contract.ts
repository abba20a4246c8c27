// Accounts, sessions and signing keys: the behaviour both adapters must show. Called from
// embedded.test.ts and redis.test.ts with a function opening fresh, empty stores.
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { StoreConflictError } from '../../src/store/errors.ts'
import type { AccountRecord, RefreshSuccessor, SessionRecord, SigningKeyRecord, Stores } from '../../src/store/ports.ts'
import { storesCases } from './with-stores.ts'

const hex = (n: number): string => randomBytes(n).toString('hex')
/** A successor offered to rotateRefresh, with a seed of its own. */
const next = (hash: string): RefreshSuccessor => ({ hash, seed: `seed-${hash}` })

export function makeAccount(fields: Partial<AccountRecord> = {}): AccountRecord {
  return {
    id: `usr_${hex(12)}`,
    username: `user-${hex(4)}`,
    passwordHash: `scrypt$15$8$1$${hex(16)}$${hex(32)}`,
    roles: ['user'],
    groups: ['g1', 'ünï "g"'],
    tenant: 'acme',
    disabled: false,
    sessionsValidFrom: '2025-01-01T00:00:00.000Z',
    createdAt: '2025-01-01T00:00:00.000Z',
    updatedAt: '2025-01-01T00:00:00.000Z',
    ...fields,
  }
}

export function makeSession(fields: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: `ses_${hex(12)}`,
    userId: `usr_${hex(12)}`,
    username: 'alice',
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    revokedAt: null,
    ...fields,
  }
}

function makeSigningKey(kid: string): SigningKeyRecord {
  return {
    kid,
    alg: 'EdDSA',
    publicJwk: { kty: 'OKP', crv: 'Ed25519', x: hex(16) },
    sealedPrivateKey: hex(40),
    createdAt: new Date().toISOString(),
    expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
  }
}

export function authStoreContract(t: Test, name: string, open: () => Promise<Stores>): void {
  const withStores = storesCases(t, name, open)

  withStores('accounts: insert, get, list by username, remove', async (t, { accounts }) => {
    const bob = makeAccount({ username: 'bob' })
    const alice = makeAccount({ username: 'alice@example.com', roles: [], groups: [] })
    await accounts.insert(bob)
    await accounts.insert(alice)
    t.strictSame(await accounts.get('bob'), bob)
    t.strictSame(await accounts.get('alice@example.com'), alice)
    t.equal(await accounts.get('carol'), null)
    t.strictSame(
      (await accounts.list()).map((a) => a.username),
      ['alice@example.com', 'bob'],
    )
    t.equal(await accounts.remove('bob'), true)
    t.equal(await accounts.remove('bob'), false)
    t.equal(await accounts.get('bob'), null)
    t.strictSame(
      (await accounts.list()).map((a) => a.username),
      ['alice@example.com'],
    )
  })

  withStores('accounts: a taken username is a conflict, and the first account stays', async (t, { accounts }) => {
    const first = makeAccount({ username: 'dup' })
    await accounts.insert(first)
    await t.rejects(accounts.insert(makeAccount({ username: 'dup' })), StoreConflictError)
    t.strictSame(await accounts.get('dup'), first)
  })

  withStores('accounts: replace is a compare-and-set', async (t, { accounts }) => {
    const original = makeAccount({ username: 'erin' })
    await accounts.insert(original)
    const disabled = { ...original, disabled: true, updatedAt: '2025-02-01T00:00:00.000Z' }
    t.equal(await accounts.replace(disabled, original), 'replaced')
    t.strictSame(await accounts.get('erin'), disabled)
    // A writer that read before the change must not undo it.
    t.equal(await accounts.replace({ ...original, roles: ['admin'] }, original), 'stale')
    t.strictSame(await accounts.get('erin'), disabled)
    const nobody = makeAccount({ username: 'nobody' })
    t.equal(await accounts.replace({ ...nobody, disabled: true }, nobody), 'missing')
    // The same username made again is another account: a write for the old one misses.
    await accounts.remove('erin')
    const again = makeAccount({ username: 'erin' })
    await accounts.insert(again)
    t.equal(await accounts.replace({ ...disabled, roles: ['x'] }, disabled), 'missing')
    t.strictSame(await accounts.get('erin'), again)
  })

  withStores('sessions: a refresh token rotates once; its reuse revokes the session', async (t, { sessions }) => {
    const session = makeSession()
    await sessions.create(session, 'h1')
    t.strictSame(await sessions.get(session.id), session)
    const now = new Date()
    const first = await sessions.rotateRefresh('h1', next('h2'), now, 0)
    t.equal(first.outcome, 'rotated')
    const second = await sessions.rotateRefresh('h2', next('h3'), now, 0)
    t.equal(second.outcome, 'rotated')
    const reused = await sessions.rotateRefresh('h1', next('h4'), now, 0)
    t.equal(reused.outcome, 'reused')
    t.equal(reused.outcome === 'reused' ? reused.session.revokedAt : null, now.toISOString())
    t.equal((await sessions.get(session.id))?.revokedAt, now.toISOString(), 'the session is revoked')
    // Even the newest token of a revoked session is refused, and h4 was never issued.
    t.equal((await sessions.rotateRefresh('h3', next('h5'), now, 0)).outcome, 'revoked')
    t.equal((await sessions.rotateRefresh('h4', next('h6'), now, 0)).outcome, 'unknown')
    t.equal((await sessions.rotateRefresh('nothing', next('h7'), now, 0)).outcome, 'unknown')
  })

  withStores('sessions: of two uses of one token at once, exactly one rotates', async (t, { sessions }) => {
    const session = makeSession()
    await sessions.create(session, 'r1')
    const outcomes = await Promise.all([
      sessions.rotateRefresh('r1', next('a'), new Date(), 0),
      sessions.rotateRefresh('r1', next('b'), new Date(), 0),
    ])
    t.strictSame(outcomes.map((o) => o.outcome).sort(), ['reused', 'rotated'])
    t.not((await sessions.get(session.id))?.revokedAt, null)
  })

  withStores(
    "sessions: a repeat within the reuse window gets the first spend's grant; the session lives",
    async (t, { sessions }) => {
      const session = makeSession()
      await sessions.create(session, 'w1')
      const at = new Date()
      const first = await sessions.rotateRefresh('w1', next('w2'), at, 5000)
      t.match(first, { outcome: 'rotated', repeat: false, grant: { seed: 'seed-w2', at: at.getTime() } })
      const again = await sessions.rotateRefresh('w1', next('w3'), new Date(at.getTime() + 4000), 5000)
      t.match(
        again,
        { outcome: 'rotated', repeat: true, grant: { seed: 'seed-w2', at: at.getTime() } },
        'the same successor',
      )
      t.equal((await sessions.get(session.id))?.revokedAt, null, 'not revoked')
      t.equal(
        (await sessions.rotateRefresh('w3', next('w4'), at, 5000)).outcome,
        'unknown',
        'the offered successor of a repeat is never stored',
      )
      // Past the window: a theft.
      const late = await sessions.rotateRefresh('w1', next('w5'), new Date(at.getTime() + 5001), 5000)
      t.equal(late.outcome, 'reused')
      t.not((await sessions.get(session.id))?.revokedAt, null, 'revoked')
    },
  )

  withStores('sessions: within the window, a token whose successor was spent is a theft', async (t, { sessions }) => {
    const session = makeSession()
    await sessions.create(session, 's1')
    const at = new Date()
    t.equal((await sessions.rotateRefresh('s1', next('s2'), at, 5000)).outcome, 'rotated')
    t.equal((await sessions.rotateRefresh('s2', next('s3'), at, 5000)).outcome, 'rotated')
    t.equal((await sessions.rotateRefresh('s1', next('s4'), at, 5000)).outcome, 'reused', 's1 again after s2 was used')
    t.not((await sessions.get(session.id))?.revokedAt, null)
    t.equal((await sessions.rotateRefresh('s3', next('s5'), at, 5000)).outcome, 'revoked')
  })

  withStores(
    'sessions: 20 spends of one token at once, within the window: one rotates, all get its grant',
    async (t, { sessions }) => {
      const session = makeSession()
      await sessions.create(session, 'c1')
      const outcomes = await Promise.all(
        Array.from({ length: 20 }, (_, i) => sessions.rotateRefresh('c1', next(`c-${i}`), new Date(), 5000)),
      )
      t.strictSame(
        outcomes.map((o) => o.outcome),
        Array<string>(20).fill('rotated'),
      )
      t.equal(outcomes.filter((o) => o.outcome === 'rotated' && !o.repeat).length, 1, 'one first spend')
      t.equal(
        new Set(outcomes.map((o) => (o.outcome === 'rotated' ? `${o.grant.seed}@${o.grant.at}` : ''))).size,
        1,
        'one grant',
      )
      t.equal((await sessions.get(session.id))?.revokedAt, null)
    },
  )

  withStores(
    'sessions: revoke marks the session once; an expired session does not refresh',
    async (t, { sessions }) => {
      const session = makeSession()
      await sessions.create(session, 'x1')
      const at = new Date('2030-01-01T00:00:00.000Z')
      t.equal(await sessions.revoke(session.id, at), true)
      t.equal(await sessions.revoke(session.id, new Date()), true)
      t.equal((await sessions.get(session.id))?.revokedAt, at.toISOString(), 'the first revocation time stays')
      t.equal(await sessions.revoke('ses_missing', at), false)
      t.equal((await sessions.rotateRefresh('x1', next('x2'), new Date(), 0)).outcome, 'revoked')

      const short = makeSession({ expiresAt: new Date(Date.now() + 60_000).toISOString() })
      await sessions.create(short, 'y1')
      t.equal((await sessions.rotateRefresh('y1', next('y2'), new Date(Date.now() + 120_000), 0)).outcome, 'revoked')
    },
  )

  withStores(
    'signing keys: added only on top of the expected newest; removed except the newest',
    async (t, { signingKeys }) => {
      t.strictSame(await signingKeys.list(), [])
      const a = makeSigningKey('k-a')
      const b = makeSigningKey('k-b')
      t.equal(await signingKeys.addIfLatest(a, null), true)
      t.equal(await signingKeys.addIfLatest(makeSigningKey('k-late'), null), false, 'another instance rotated first')
      t.equal(await signingKeys.addIfLatest(b, 'k-a'), true)
      t.equal(await signingKeys.addIfLatest(makeSigningKey('k-c'), 'k-a'), false)
      t.strictSame(await signingKeys.list(), [a, b])
      await signingKeys.remove('k-b')
      t.strictSame(
        (await signingKeys.list()).map((k) => k.kid),
        ['k-a', 'k-b'],
        'the newest key stays',
      )
      await signingKeys.remove('k-a')
      t.strictSame(await signingKeys.list(), [b])
    },
  )
}
