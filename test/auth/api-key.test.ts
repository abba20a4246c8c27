// The API-key authenticator hashes a key once (issue #24: the HMAC was a per-call cost), and
// what it keeps changes no answer: a revoked key, a rotated key past its grace, a mistyped
// key and an unknown one are refused as before, and only keys that found a record are kept.
import type { IncomingMessage } from 'node:http'
import t from 'tap'
import { createApiKeyAuthenticator } from '../../src/auth/api-key.ts'
import { GatewayError } from '../../src/errors.ts'
import { createKeyHasher, generateKey } from '../../src/keys/format.ts'
import type { KeyRecord } from '../../src/keys/record.ts'

const request = (key: string): IncomingMessage =>
  ({ headers: { authorization: `Bearer ${key}` }, socket: { remoteAddress: '10.0.0.1' } }) as unknown as IncomingMessage

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'ok'
  } catch (err) {
    if (err instanceof GatewayError) return err.errorName
    throw err
  }
}

function rig() {
  const real = createKeyHasher('secret')
  let hashes = 0
  const hash = (key: string): string => {
    hashes++
    return real(key)
  }
  const key = generateKey()
  const record = {
    id: 'key_1',
    owner: 'alice',
    tier: 'Basic',
    hash: real(key),
    status: 'active',
    expiresAt: null,
    previousHash: null,
    previousHashValidUntil: null,
  } as unknown as KeyRecord
  let current: KeyRecord | null = record
  const lookup = {
    findByHash: async (h: string) =>
      current !== null && (h === current.hash || h === current.previousHash) ? current : null,
  }
  return {
    key,
    record,
    real,
    authenticate: createApiKeyAuthenticator({ lookup, hash }),
    hashes: () => hashes,
    set: (next: KeyRecord | null) => {
      current = next
    },
  }
}

t.test('a key that found its record is hashed once, however often it is presented', async (t) => {
  const r = rig()
  for (let i = 0; i < 5; i++) t.equal(await codeOf(r.authenticate(request(r.key))), 'ok')
  t.equal(r.hashes(), 1, 'one HMAC for five calls')
})

t.test('what is kept changes no answer: revoked, rotated past grace, unknown', async (t) => {
  const r = rig()
  t.equal(await codeOf(r.authenticate(request(r.key))), 'ok')
  r.set({ ...r.record, status: 'revoked' })
  t.equal(await codeOf(r.authenticate(request(r.key))), 'revoked_api_key', 'revoked after it was kept')
  const next = generateKey()
  r.set({
    ...r.record,
    hash: r.real(next),
    previousHash: r.record.hash,
    previousHashValidUntil: new Date(Date.now() - 1000).toISOString(),
  })
  t.equal(await codeOf(r.authenticate(request(r.key))), 'invalid_api_key', 'rotated, its grace over')
  r.set(null)
  t.equal(await codeOf(r.authenticate(request(r.key))), 'invalid_api_key', 'gone from the store')
})

t.test('a key that found nothing is not kept: hashed again each time', async (t) => {
  const r = rig()
  const unknown = generateKey()
  for (let i = 0; i < 3; i++) t.equal(await codeOf(r.authenticate(request(unknown))), 'invalid_api_key')
  t.equal(r.hashes(), 3)
  const mistyped = `${r.key.slice(0, -1)}${r.key.endsWith('a') ? 'b' : 'a'}`
  t.equal(await codeOf(r.authenticate(request(mistyped))), 'invalid_api_key', 'a mistyped key: refused')
  t.equal(r.hashes(), 3, 'before any hash (checksum)')
})

t.test(
  "x-api-key, as Anthropic's SDKs send it: accepted alone or beside the same key, refused beside another",
  async (t) => {
    const r = rig()
    const withHeaders = (headers: Record<string, string>): IncomingMessage =>
      ({ headers, socket: { remoteAddress: '10.0.0.1' } }) as unknown as IncomingMessage
    t.equal(await codeOf(r.authenticate(withHeaders({ 'x-api-key': r.key }))), 'ok')
    t.equal(
      await codeOf(r.authenticate(withHeaders({ 'x-api-key': r.key, authorization: `Bearer ${r.key}` }))),
      'ok',
      'the same key twice',
    )
    t.equal(
      await codeOf(r.authenticate(withHeaders({ 'x-api-key': generateKey(), authorization: `Bearer ${r.key}` }))),
      'invalid_api_key',
      'two different keys',
    )
    t.equal(
      await codeOf(r.authenticate(withHeaders({ 'x-api-key': generateKey(), 'api-key': r.key }))),
      'invalid_api_key',
      'two different keys, neither a Bearer',
    )
  },
)
