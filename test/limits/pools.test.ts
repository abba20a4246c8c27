// The batch pool (src/limits/pools.ts) on both stores: a batch's lines are counted apart
// from their key's interactive calls. An interactive call is admitted on the interactive
// counters alone, so a batch never refuses it; a batch line only in the room the
// interactive calls leave of the key's limit; a batch line's settle gives back to its pool
// only; the lifetime quota is one count for both. On Redis the pool's counters sit on the
// slot of the key's others.
import t, { type Test } from 'tap'
import type { Usage } from '../../src/backends/port.ts'
import type { ModelLimits } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { createLimiter, type ManagedLimiter } from '../../src/limits/limiter.ts'
import type { Admission, AdmissionRequest } from '../../src/limits/port.ts'
import { limiterKeys } from '../../src/limits/redis-counters.ts'
import { pingRedis } from '../../src/store/redis-client.ts'
import { captureLog, keysUnder, quietMetrics, randomId, redisClient, redisSpace } from './helpers.ts'

const MODEL = 'm'
const use = (inputTokens: number, outputTokens: number): Usage => ({ inputTokens, outputTokens })

interface Key {
  /** An interactive call's admission, or the refusal's error. */
  interactive(estimate?: Usage): Promise<Admission | GatewayError>
  /** A batch line's admission, or the refusal's error. */
  batch(estimate?: Usage): Promise<Admission | GatewayError>
  /** How many of `n` admissions in a row are granted. */
  granted(kind: 'interactive' | 'batch', n: number, estimate?: Usage): Promise<number>
  readonly keyId: string
}

function keyOn(limiter: ManagedLimiter, limits: ModelLimits): Key {
  const keyId = randomId()
  const request = (batch: boolean, estimate: Usage): AdmissionRequest => ({
    keyId,
    owner: `owner-of-${keyId}`,
    tier: 'T',
    model: MODEL,
    limits,
    estimate,
    ...(batch ? { batch: true as const } : {}),
  })
  const ask = (batch: boolean, estimate: Usage): Promise<Admission | GatewayError> =>
    limiter.admit(request(batch, estimate)).catch((error: unknown) => {
      if (error instanceof GatewayError) return error
      throw error
    })
  const key: Key = {
    keyId,
    interactive: (estimate = use(1, 1)) => ask(false, estimate),
    batch: (estimate = use(1, 1)) => ask(true, estimate),
    async granted(kind, n, estimate = use(1, 1)) {
      let ok = 0
      for (let i = 0; i < n; i++) if (!((await key[kind](estimate)) instanceof GatewayError)) ok++
      return ok
    },
  }
  return key
}

function pool(t: Test, name: string, make: () => Promise<ManagedLimiter>): void {
  const setup = async (t: Test): Promise<ManagedLimiter> => {
    const limiter = await make()
    t.teardown(() => limiter.close())
    return limiter
  }

  t.test(
    `${name}: a batch alone takes the whole window, and the key's interactive calls still get theirs`,
    async (t) => {
      const key = keyOn(await setup(t), { rpm: 5 })
      t.equal(await key.granted('batch', 7), 5, 'the batch: 5 of a 5-RPM window')
      const refused = await key.batch()
      t.ok(refused instanceof GatewayError && refused.errorName === 'rate_limit_requests', 'then its lines wait')
      const wait = refused instanceof GatewayError ? Number(refused.headers['retry-after-ms']) : 0
      t.ok(wait > 0 && wait <= 60_000, 'until the window resets')
      t.equal(await key.granted('interactive', 7), 5, 'interactive calls: all 5 of theirs, none refused for the batch')
    },
  )

  t.test(`${name}: beside interactive calls, a batch uses only the room they leave`, async (t) => {
    const key = keyOn(await setup(t), { rpm: 5 })
    t.equal(await key.granted('interactive', 3), 3)
    t.equal(await key.granted('batch', 5), 2, 'the batch: the 2 requests left')
    t.equal(await key.granted('interactive', 5), 2, 'the interactive calls: the rest of their own 5')
    const refused = await key.batch()
    const wait = refused instanceof GatewayError ? Number(refused.headers['retry-after-ms']) : 0
    t.ok(wait > 0 && wait <= 60_000, "a batch line refused for the interactive calls' use waits for a window's reset")
  })

  t.test(`${name}: tokens too; a batch line's settle gives back to the batch's pool only`, async (t) => {
    const limiter = await setup(t)
    const key = keyOn(limiter, { tpm: 100 })
    const lines: Admission[] = []
    for (let i = 0; i < 4; i++) {
      const admitted = await key.batch(use(20, 10))
      if (!(admitted instanceof GatewayError)) lines.push(admitted)
    }
    t.equal(lines.length, 3, '3 lines of 30 tokens in 100')
    await lines[0]?.settle(use(0, 0), { withdrawn: true })
    t.equal(await key.granted('batch', 2, use(20, 10)), 1, 'the tokens given back serve the next line')
    const peek = await limiter.peek({
      keyId: key.keyId,
      owner: `owner-of-${key.keyId}`,
      tier: 'T',
      model: MODEL,
      limits: { tpm: 100 },
    })
    t.equal(peek['x-ratelimit-remaining-tokens'], '100', "an interactive call's headers show the interactive pool")
    t.equal(await key.granted('interactive', 4, use(20, 10)), 3, 'and interactive calls get their 100 tokens')
  })

  t.test(`${name}: the lifetime quota is one count for both`, async (t) => {
    const key = keyOn(await setup(t), { quota: 100 })
    const line = await key.batch(use(40, 20))
    t.notOk(line instanceof GatewayError)
    if (!(line instanceof GatewayError)) await line.settle(use(40, 20))
    const call = await key.interactive(use(40, 20))
    t.notOk(call instanceof GatewayError, '60 of 100 used: an interactive call fits')
    if (!(call instanceof GatewayError)) await call.settle(use(40, 20))
    const spent = await key.batch(use(1, 1))
    t.ok(
      spent instanceof GatewayError && spent.errorName === 'insufficient_quota',
      'then the quota is spent for the batch',
    )
    const also = await key.interactive(use(1, 1))
    t.ok(also instanceof GatewayError && also.errorName === 'insufficient_quota', 'and for interactive calls')
  })
}

// Asked before any test is registered: the file's tests would otherwise end before Redis answered.
const { namespace, admin, clients } = redisSpace(t)
const redisUp = await pingRedis(admin)

pool(t, 'memory', async () => createLimiter({ log: captureLog().log, metrics: quietMetrics() }))

if (!redisUp) {
  t.fail('Redis does not answer: the batch pool tests on Redis need it')
} else {
  let n = 0
  const prefixes: string[] = []
  const onRedis = async (): Promise<ManagedLimiter> => {
    const redis = redisClient()
    clients.push(redis)
    await pingRedis(redis)
    const prefix = `${namespace}pool${n++}:`
    prefixes.push(prefix)
    return createLimiter({ redis, prefix, log: captureLog().log, metrics: quietMetrics(), redisTimeoutMs: 2000 })
  }
  pool(t, 'redis', onRedis)

  t.test("redis: the batch pool's counters are on the slot of the key's others", async (t) => {
    const limiter = await onRedis()
    t.teardown(() => limiter.close())
    const key = keyOn(limiter, { rpm: 5, tpm: 1000 })
    t.notOk((await key.batch()) instanceof GatewayError)
    t.notOk((await key.interactive()) instanceof GatewayError)
    const prefix = prefixes.at(-1) ?? ''
    const subject = { keyId: key.keyId, model: MODEL, owner: `owner-of-${key.keyId}` }
    const keys = limiterKeys(prefix)
    const interactive = keys.counter(subject, { name: 'requests' })
    const batch = keys.counter({ ...subject, pool: 'batch' }, { name: 'requests' })
    t.not(batch, interactive, 'counters of their own')
    t.equal(batch.slice(0, batch.indexOf('}')), interactive.slice(0, interactive.indexOf('}')), 'under one hash tag')
    const stored = await keysUnder(admin, prefix)
    t.ok(stored.includes(batch) && stored.includes(interactive), 'both written')
    t.equal(await admin.get(batch), '1')
    t.equal(await admin.get(interactive), '1')
  })
}
