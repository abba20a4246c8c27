// Failed authentication is throttled per client address: past auth.maxFailures in a
// window the address gets 429 with retry-after, for API keys and the admin token alike,
// and a throttled address never costs a key lookup (counted on a stand-in store, and on
// the wire between a gateway and its Redis). Other addresses are not affected, and each kind
// of credential counts its own failures: wrong API keys never lock out the right admin token.
import { randomBytes } from 'node:crypto'
import http, { type IncomingMessage } from 'node:http'
import t from 'tap'
import { createAdminAuthenticator } from '../../src/auth/admin.ts'
import { createApiKeyAuthenticator } from '../../src/auth/api-key.ts'
import { createAuthThrottle, throttleAdmin, throttleApiKeys } from '../../src/auth/throttle.ts'
import { GatewayError } from '../../src/errors.ts'
import { clientAddress } from '../../src/http/client-address.ts'
import { createKeyHasher, generateKey } from '../../src/keys/format.ts'
import type { KeyRecord } from '../../src/keys/record.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { REDIS_URL, redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { startTcpProxy } from '../keys/tcp-proxy.ts'
import { readText } from '../helpers/http.ts'

const fakeRequest = (address: string, authorization?: string, forwarded?: string): IncomingMessage =>
  ({
    headers: {
      ...(authorization === undefined ? {} : { authorization }),
      ...(forwarded === undefined ? {} : { 'x-forwarded-for': forwarded }),
    },
    socket: { remoteAddress: address },
  }) as unknown as IncomingMessage

async function statusOf(promise: Promise<unknown>): Promise<number> {
  try {
    await promise
    return 200
  } catch (err) {
    if (err instanceof GatewayError) return err.status
    throw err
  }
}

t.test('unit: past the limit an address is refused before any lookup, for its blockSeconds', async (t) => {
  const hash = createKeyHasher('secret')
  const good = generateKey()
  const record = {
    id: 'key_1',
    hash: hash(good),
    status: 'active',
    expiresAt: null,
    previousHash: null,
    previousHashValidUntil: null,
  } as unknown as KeyRecord
  let lookups = 0
  const lookup = {
    findByHash: async (h: string) => {
      lookups++
      return h === record.hash ? record : null
    },
  }
  const throttle = createAuthThrottle({ maxFailures: 5, windowSeconds: 60, blockSeconds: 1 })
  const authenticate = throttleApiKeys(createApiKeyAuthenticator({ lookup, hash }), throttle, (req) =>
    clientAddress(req, 0),
  )

  for (let i = 0; i < 6; i++)
    t.equal(
      await statusOf(authenticate(fakeRequest('10.0.0.1', `Bearer ${generateKey()}`))),
      401,
      `failure ${i + 1}: 401`,
    )
  t.equal(lookups, 6, 'each of them looked its key up')
  let refused: unknown
  try {
    await authenticate(fakeRequest('10.0.0.1', `Bearer ${good}`))
  } catch (err) {
    refused = err
  }
  t.ok(
    refused instanceof GatewayError && refused.status === 429 && refused.code === 'too_many_auth_failures',
    'then even a good key gets 429',
  )
  const headers = (refused as GatewayError).headers
  t.ok(
    Number(headers['retry-after']) >= 1 && Number(headers['retry-after-ms']) <= 1000,
    `with retry-after ${headers['retry-after']} s, retry-after-ms ${headers['retry-after-ms']}`,
  )
  for (let i = 0; i < 100; i++)
    await statusOf(authenticate(fakeRequest('10.0.0.1', i % 2 ? `Bearer ${generateKey()}` : undefined)))
  t.equal(lookups, 6, 'a throttled address costs no lookup at all')
  t.equal(
    await statusOf(authenticate(fakeRequest('10.0.0.2', `Bearer ${good}`))),
    200,
    'another address is not affected',
  )
  t.equal(await statusOf(authenticate(fakeRequest('2001:db8:1:2::7', `Bearer ${generateKey()}`))), 401)
  t.equal(throttle.blocked(), 1, 'one address blocked')

  await new Promise((r) => setTimeout(r, 1100))
  t.equal(
    await statusOf(authenticate(fakeRequest('10.0.0.1', `Bearer ${good}`))),
    200,
    'after the block the address may try again',
  )
})

t.test(
  'unit: wrong admin tokens throttle the admin token; an IPv6 client counts by its /64; X-Forwarded-For only behind trusted hops',
  async (t) => {
    const throttle = createAuthThrottle({ maxFailures: 3, windowSeconds: 60, blockSeconds: 60 })
    const admin = throttleAdmin(createAdminAuthenticator('right'), throttle, (req) => clientAddress(req, 0))
    const call = (address: string, token: string): number => {
      try {
        admin(fakeRequest(address, `Bearer ${token}`))
        return 200
      } catch (err) {
        return (err as GatewayError).status
      }
    }
    // Four addresses of one /64: one client.
    for (let i = 1; i <= 4; i++) t.equal(call(`2001:db8:aa:bb::${i}`, 'wrong'), 401)
    await new Promise((r) => setImmediate(r))
    t.equal(call('2001:db8:aa:bb:ffff::1', 'right'), 429, 'the /64 is throttled, even with the right token')
    t.equal(call('2001:db8:aa:bc::1', 'right'), 200, 'the next /64 is not')
    t.equal(call('::ffff:192.0.2.1', 'right'), 200)

    t.equal(
      clientAddress(fakeRequest('10.0.0.9', undefined, '1.2.3.4, 5.6.7.8'), 0),
      '10.0.0.9',
      'no trusted hops: the peer',
    )
    t.equal(
      clientAddress(fakeRequest('10.0.0.9', undefined, '1.2.3.4, 5.6.7.8'), 1),
      '5.6.7.8',
      'one hop: what it appended',
    )
    t.equal(clientAddress(fakeRequest('10.0.0.9', undefined, '1.2.3.4, 5.6.7.8'), 2), '1.2.3.4')
    t.equal(clientAddress(fakeRequest('10.0.0.9'), 1), '10.0.0.9', 'no header: the peer')
  },
)

// End to end: a gateway on Redis, reached through a proxy that counts its key lookups.
const ns = await redisNamespace(t)
if (!ns.up) {
  t.fail(redisMissing())
} else {
  t.test(
    'a gateway: a throttled address gets 429 with retry-after and sends not one key lookup to Redis',
    async (t) => {
      let lookups = 0
      const redisUrl = new URL(REDIS_URL)
      const proxy = await startTcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379), {
        onClientData: (chunk) => {
          lookups += chunk.toString('latin1').split('{tg}:keyhash:').length - 1
        },
      })
      t.teardown(() => proxy.close())
      const gw: RunningTollgate = await startTollgate({
        env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}`, TOLLGATE_KEY_SECRET: randomBytes(24).toString('hex') },
        config: (doc) => {
          ;(doc.store as Record<string, unknown>).keyPrefix = ns.prefix
          doc.auth = { maxFailures: 5, windowSeconds: 60, blockSeconds: 3 }
        },
      })
      t.teardown(() => gw.stop())
      const { key } = await gw.createKey({ tier: 'Standard4000' })
      const port = Number(new URL(gw.url).port)
      const get = (
        localAddress: string,
        path: string,
        authorization?: string,
      ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> =>
        new Promise((done, fail) => {
          const req = http.request(
            {
              host: '127.0.0.1',
              port,
              path,
              localAddress,
              agent: false,
              headers: authorization === undefined ? {} : { authorization },
            },
            readText(done),
          )
          req.on('error', fail)
          req.end()
        })

      t.equal((await get('127.0.0.5', '/v2/models', `Bearer ${key}`)).status, 200, 'a good key works')
      for (let i = 0; i < 6; i++)
        t.equal(
          (await get('127.0.0.5', '/v2/models', `Bearer ${generateKey()}`)).status,
          401,
          `wrong key ${i + 1}: 401`,
        )
      const counted = lookups
      t.ok(counted >= 6, `the wrong keys were looked up in Redis (${counted} lookups)`)

      const refusals = await Promise.all(
        Array.from({ length: 30 }, (_, i) => get('127.0.0.5', '/v2/models', `Bearer ${i % 2 ? generateKey() : key}`)),
      )
      t.ok(
        refusals.every((r) => r.status === 429),
        'then every API key from the address gets 429, the good one too',
      )
      t.equal(
        (await get('127.0.0.5', '/admin/keys', `Bearer ${gw.adminToken}`)).status,
        200,
        "the right admin token is not throttled by the API keys' failures",
      )
      const body = JSON.parse(refusals[0]?.body ?? '{}') as {
        error?: { code?: string; type?: string; param?: unknown; message?: string }
      }
      t.match(
        body,
        { error: { code: 'too_many_auth_failures', type: 'requests', param: null, message: /Try again in \d+s/ } },
        "in OpenAI's error shape",
      )
      const retryAfter = Number(refusals[0]?.headers['retry-after'])
      t.ok(retryAfter >= 1 && retryAfter <= 3, `retry-after: ${retryAfter}`)
      t.ok(Number(refusals[0]?.headers['retry-after-ms']) > 0, 'and retry-after-ms')
      await new Promise((r) => setTimeout(r, 200))
      t.equal(lookups, counted, 'not one key lookup reached Redis for them')

      t.equal((await get('127.0.0.6', '/v2/models', `Bearer ${key}`)).status, 200, 'another address is served')
      for (let i = 0; i < 6; i++) await get('127.0.0.7', '/admin/keys', 'Bearer not-the-admin-token')
      t.equal(
        (await get('127.0.0.7', '/admin/keys', `Bearer ${gw.adminToken}`)).status,
        429,
        'wrong admin tokens throttle their address too',
      )
      t.equal(
        (await get('127.0.0.7', '/v2/models', `Bearer ${key}`)).status,
        200,
        "an API key is not throttled by the admin token's failures",
      )

      await new Promise((r) => setTimeout(r, 3200))
      t.equal(
        (await get('127.0.0.5', '/v2/models', `Bearer ${key}`)).status,
        200,
        'after blockSeconds the address is served again',
      )
    },
  )
}
