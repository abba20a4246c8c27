// The presented key's HMAC is computed once per key-cache TTL, not per request; what the
// key record says (revoked, rotated) is still read on every request, and a malformed key is
// refused every time without being hashed.
import t from 'tap'
import type { IncomingMessage } from 'node:http'
import { createApiKeyAuthenticator } from '../../src/auth/api-key.ts'
import { createKeyHasher, generateKey } from '../../src/keys/format.ts'
import type { KeyRecord } from '../../src/keys/record.ts'

const hasher = createKeyHasher('test-secret-test-secret-test-secret-x')
const request = (key: string): IncomingMessage => ({ headers: { authorization: `Bearer ${key}` } }) as IncomingMessage

/** The error name a refused authentication carries. */
const refusal = (attempt: Promise<unknown>): Promise<unknown> =>
  attempt.then(
    () => 'accepted',
    (err: unknown) => (err as { errorName?: unknown }).errorName,
  )

function setup() {
  const key = generateKey()
  const at = '2026-01-01T00:00:00.000Z'
  let record: KeyRecord = {
    id: 'key_a',
    hash: hasher(key),
    previousHash: null,
    previousHashValidUntil: null,
    prefix: key.slice(0, 12),
    name: null,
    owner: 'owner-a',
    tier: 'Basic',
    models: null,
    endpoints: null,
    limits: null,
    status: 'active',
    createdAt: at,
    updatedAt: at,
    expiresAt: null,
  } as KeyRecord
  let clock = 1_000_000
  const counts = { hashes: 0, lookups: 0 }
  const authenticate = createApiKeyAuthenticator({
    hash: (k) => {
      counts.hashes++
      return hasher(k)
    },
    lookup: {
      findByHash: async (hash) => {
        counts.lookups++
        return hash === record.hash ? record : null
      },
    },
    now: () => clock,
    hashMemoMs: 1000,
  })
  return {
    key,
    counts,
    authenticate,
    advance: (ms: number) => (clock += ms),
    revoke: () => (record = { ...record, status: 'revoked' }),
  }
}

t.test('a burst with one key hashes it once per TTL; the record is read every time', async (t) => {
  const s = setup()
  for (let i = 0; i < 5; i++) t.equal((await s.authenticate(request(s.key))).keyId, 'key_a')
  t.same(s.counts, { hashes: 1, lookups: 5 })
  s.advance(1001)
  await s.authenticate(request(s.key))
  t.equal(s.counts.hashes, 2, 'hashed again once the TTL is over')
})

t.test('a key revoked meanwhile is refused at once, its hash remembered or not', async (t) => {
  const s = setup()
  await s.authenticate(request(s.key))
  s.revoke()
  t.equal(await refusal(s.authenticate(request(s.key))), 'revoked_api_key')
  t.equal(s.counts.hashes, 1)
})

t.test('a malformed key is refused every time and never hashed', async (t) => {
  const s = setup()
  const typo = s.key.slice(0, -1) + (s.key.endsWith('a') ? 'b' : 'a')
  for (let i = 0; i < 2; i++) t.equal(await refusal(s.authenticate(request(typo))), 'invalid_api_key')
  t.same(s.counts, { hashes: 0, lookups: 0 })
})
