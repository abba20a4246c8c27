// The limiter on the shared Redis: the same contract as in memory, plus what only Redis
// has: one round trip per admission, the key layout (readable by rate-limiter-flexible's
// RateLimiterRedis), and several instances enforcing one set of counters.
//
// Redis at REDIS_URL (default 127.0.0.1:6379) is shared: everything here lives under a
// random `tgtest:limits:` prefix and is deleted at the end. Without Redis these tests fail.
import t, { type Test } from 'tap'
import { RateLimiterRedis } from 'rate-limiter-flexible'
import { createLimiter, type LimiterOptions, type ManagedLimiter } from '../../src/limits/limiter.ts'
import { limiterKeys } from '../../src/limits/redis-counters.ts'
import type { Redis } from 'ioredis'
import type { Writable } from 'node:stream'
import { createRedisClient, pingRedis } from '../../src/store/redis-client.ts'
import { caller, limiterContract } from './contract.ts'
import {
  captureLog,
  countCommands,
  keysUnder,
  quietMetrics,
  randomId,
  REDIS_URL,
  redisClient,
  redisSpace,
} from './helpers.ts'

const { namespace: NAMESPACE, admin, clients } = redisSpace(t)
let n = 0

/** A limiter on a fresh prefix (or `prefix`) with a Redis client of its own, whose commands a test may count. */
async function limiterWithItsClient(
  options: Partial<LimiterOptions> = {},
  prefix = `${NAMESPACE}${n++}:`,
): Promise<{ redis: Redis; limiter: ManagedLimiter }> {
  const redis = redisClient()
  clients.push(redis)
  await pingRedis(redis)
  // A generous deadline: the shared Redis may be busy with other suites.
  const limiter = createLimiter({
    redis,
    prefix,
    log: captureLog().log,
    metrics: quietMetrics(),
    redisTimeoutMs: 2000,
    ...options,
  })
  return { redis, limiter }
}

/** The writes that reach `redis`'s socket (a corked turn's commands are one), counted until restored. */
function socketWrites(redis: Redis): { count(): number; restore(): void } {
  const socket = redis.stream as Writable & { _write: Writable['_write']; _writev?: Writable['_writev'] }
  const { _write: write, _writev: writev } = socket
  let n = 0
  socket._write = (...args) => {
    n++
    write.apply(socket, args)
  }
  if (writev !== undefined)
    socket._writev = (...args) => {
      n++
      writev.apply(socket, args)
    }
  return {
    count: () => n,
    restore: () => {
      socket._write = write
      if (writev !== undefined) socket._writev = writev
    },
  }
}

async function onRedis(options: Partial<LimiterOptions> = {}, prefix?: string): Promise<ManagedLimiter> {
  return (await limiterWithItsClient(options, prefix)).limiter
}

/** limiterWithItsClient, closed at the end of `t`. */
async function ownLimiter(t: Test): Promise<{ redis: Redis; limiter: ManagedLimiter }> {
  const own = await limiterWithItsClient()
  t.teardown(() => own.limiter.close())
  return own
}

if (!(await pingRedis(admin))) {
  t.fail(
    `Redis does not answer at ${REDIS_URL}: the limiter's Redis tests need it (set REDIS_URL or start redis-server)`,
  )
} else {
  limiterContract(t, 'redis', (options) => onRedis(options))

  t.test('redis: one round trip per admission, per settle and per peek', async (t) => {
    const { redis, limiter } = await ownLimiter(t)
    t.equal(limiter.health().mode, 'redis')
    const c = caller(limiter, { rpm: 100, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000, quota: 1_000_000 })
    await c.admit({ inputTokens: 1, outputTokens: 1 }) // loads the scripts
    const commands = countCommands(redis)
    t.teardown(() => commands.restore())
    for (let i = 0; i < 10; i++) {
      const admission = await c.admit({ inputTokens: 100, outputTokens: 100 })
      await admission.settle({ inputTokens: 90, outputTokens: 40 })
    }
    await c.peek()
    t.equal(commands.count('evalsha'), 21, 'ten admissions, ten settles and one peek')
    t.equal(commands.count(), 21, 'and nothing else: five dimensions in one script call each')
    commands.reset()
    const refused = await c.refusal({ inputTokens: 60_000, outputTokens: 0 })
    t.equal(refused.errorName, 'rate_limit_tokens')
    t.equal(commands.count(), 1, 'a refusal is one round trip too: nothing to roll back')
  })

  t.test('redis: the admissions of one turn go in one script per slot, taken in order, exactly', async (t) => {
    const { redis, limiter } = await ownLimiter(t)
    const one = caller(limiter, { rpm: 5, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000, quota: 1_000_000 })
    const other = caller(limiter, { rpm: 100, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000, quota: 1_000_000 })
    await (await one.admit({ inputTokens: 1, outputTokens: 1 })).settle({ inputTokens: 1, outputTokens: 1 })
    const commands = countCommands(redis)
    t.teardown(() => commands.restore())
    // Eight calls of a key with 4 requests left, and two of another key (another slot), in one turn.
    const outcomes = await Promise.allSettled([
      ...Array.from({ length: 8 }, () => one.admit({ inputTokens: 10, outputTokens: 10 })),
      ...Array.from({ length: 2 }, () => other.admit({ inputTokens: 10, outputTokens: 10 })),
    ])
    t.equal(commands.count('evalsha'), 2, 'one script per slot for the turn')
    t.same(
      outcomes.map((o) => o.status),
      [...Array(4).fill('fulfilled'), ...Array(4).fill('rejected'), 'fulfilled', 'fulfilled'],
      'the first four in the order made are admitted, the rest refused; the other key is apart',
    )
    const refusal = outcomes[4]
    t.match(refusal?.status === 'rejected' ? refusal.reason : null, { errorName: 'rate_limit_requests' })
    t.same(await one.used(), { requests: 5, tokens: 2 + 4 * 20, 'input-tokens': 1 + 40, 'output-tokens': 1 + 40 })
    t.same(await other.used(), { requests: 2, tokens: 40, 'input-tokens': 20, 'output-tokens': 20 })
  })

  t.test('redis: the settles of one turn go in one script per slot, each counted exactly', async (t) => {
    const { redis, limiter } = await ownLimiter(t)
    const limits = { rpm: 100, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000, quota: 1_000_000 }
    const one = caller(limiter, limits)
    const other = caller(limiter, limits)
    await (await one.admit({ inputTokens: 1, outputTokens: 1 })).settle({ inputTokens: 1, outputTokens: 1 })
    const ones = await Promise.all(Array.from({ length: 4 }, () => one.admit({ inputTokens: 100, outputTokens: 100 })))
    const others = await Promise.all(
      Array.from({ length: 2 }, () => other.admit({ inputTokens: 100, outputTokens: 100 })),
    )
    const commands = countCommands(redis)
    t.teardown(() => commands.restore())
    // Six calls end in one turn: four of one key, two of another (another slot).
    await Promise.all([
      ...ones.map((a, i) => a.settle({ inputTokens: 10 * (i + 1), outputTokens: 5 })),
      ...others.map((a) => a.settle({ inputTokens: 7, outputTokens: 3 })),
    ])
    t.equal(commands.count('evalsha'), 2, 'one SETTLE per slot for the turn')
    t.same(
      await one.used(),
      { requests: 5, tokens: 1 + 1 + 100 + 4 * 5, 'input-tokens': 1 + 100, 'output-tokens': 1 + 4 * 5 },
      "the first key's counters: each call's own adjustment (10+20+30+40 in, 4×5 out, besides the first call)",
    )
    t.same(await other.used(), { requests: 2, tokens: 20, 'input-tokens': 14, 'output-tokens': 6 })
  })

  t.test("redis: on one server a turn's admissions and settles leave in one socket write", async (t) => {
    const settlements = createRedisClient(REDIS_URL, {
      commandTimeoutMs: 2000,
      name: 'tgtest-limits',
      autoPipelining: true,
    })
    clients.push(settlements)
    await pingRedis(settlements)
    const { redis, limiter } = await limiterWithItsClient({ settlements })
    t.teardown(() => limiter.close())
    const limits = { rpm: 100, tpm: 100_000, input_tpm: 50_000, output_tpm: 50_000, quota: 1_000_000 }
    const one = caller(limiter, limits)
    const other = caller(limiter, limits)
    await (await one.admit({ inputTokens: 1, outputTokens: 1 })).settle({ inputTokens: 1, outputTokens: 1 })
    const admitted = await Promise.all([one, other].map((c) => c.admit({ inputTokens: 100, outputTokens: 100 })))
    const writes = [socketWrites(redis), socketWrites(settlements)] as const
    t.teardown(() => writes.forEach((w) => w.restore()))
    // One turn: both calls end and two more start, on two slots.
    await Promise.all([
      ...admitted.map((a) => a.settle({ inputTokens: 10, outputTokens: 5 })),
      one.admit({ inputTokens: 20, outputTokens: 20 }),
      other.admit({ inputTokens: 20, outputTokens: 20 }),
    ])
    t.equal(
      writes[1].count(),
      1,
      'two admissions and two settles (four scripts) in one write on the settlements socket',
    )
    t.equal(writes[0].count(), 0, 'nothing on the other connection')
    t.same(
      await one.used(),
      { requests: 3, tokens: 1 + 1 + 10 + 5 + 40, 'input-tokens': 1 + 10 + 20, 'output-tokens': 1 + 5 + 20 },
      'each counted exactly: the settled call at what it used, the new one at its reservation',
    )
  })

  t.test("redis: keys on the owner's slot, in the layout of rate-limiter-flexible", async (t) => {
    const prefix = `${NAMESPACE}${n++}:`
    const limiter = await onRedis({}, prefix)
    t.teardown(() => limiter.close())
    const c = caller(limiter, { rpm: 20, input_tpm: 18_750, output_tpm: 7500, quota: 5000 })
    await (await c.admit({ inputTokens: 1200, outputTokens: 300 })).settle({ inputTokens: 1200, outputTokens: 100 })
    const keys = limiterKeys(prefix)
    const model = 'Mistral-Small-24B-Instruct-2501'
    const names = await keysUnder(admin, prefix)
    // hl and ht (the quota's holds of calls in flight) are gone once the call settled. A key
    // without an owner is its own: {k:<id>}.
    t.same(names.sort(), ['i', 'o', 'q', 'r'].map((d) => `${prefix}{k:${c.keyId}}:rl:${c.keyId}:${model}:${d}`).sort())
    t.equal(
      keys.counter({ keyId: c.keyId, model }, { name: 'requests' }),
      `${prefix}{k:${c.keyId}}:rl:${c.keyId}:${model}:r`,
    )
    t.equal(
      keys.counter({ keyId: c.keyId, model, owner: 'ana b{c}' }, { name: 'requests' }),
      `${prefix}{o:ana%20b%7Bc%7D}:rl:${c.keyId}:${model}:r`,
      "an owned key on its owner's slot, the owner encoded so no brace ends the tag",
    )
    t.equal(
      keys.counter({ keyId: c.keyId, model, owner: c.keyId }, { name: 'requests' }),
      keys.counter({ keyId: c.keyId, model }, { name: 'requests' }),
      'a key that is its own owner',
    )
    // The library reads our counters: same value-and-TTL layout.
    const library = new RateLimiterRedis({ storeClient: admin, keyPrefix: '', points: 18_750, duration: 60 })
    const input = await library.get(keys.counter({ keyId: c.keyId, model }, { name: 'input_tokens' }))
    t.equal(input?.consumedPoints, 1200)
    t.equal(input?.remainingPoints, 18_750 - 1200)
    t.ok(input !== null && input.msBeforeNext > 0 && input.msBeforeNext <= 60_000, 'the window has a TTL')
    t.equal(
      await admin.pttl(keys.counter({ keyId: c.keyId, model }, { name: 'quota' })),
      -1,
      'the lifetime quota never expires',
    )
    t.equal(await admin.get(keys.counter({ keyId: c.keyId, model }, { name: 'quota' })), '1300')
    t.throws(() => limiterKeys('bad{prefix}'), RangeError)
  })

  t.test('redis: three instances share one set of counters', async (t) => {
    const prefix = `${NAMESPACE}${n++}:`
    const limiters = await Promise.all([onRedis({}, prefix), onRedis({}, prefix), onRedis({}, prefix)])
    t.teardown(() => Promise.all(limiters.map((l) => l.close())))
    const keyId = randomId()
    const limits = { rpm: 20, tpm: 1_000_000 }
    const callers = limiters.map((l) => caller(l, limits, 'gpt-4o', keyId))
    const results = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => callers[i % 3]?.admit({ inputTokens: 7, outputTokens: 3 })),
    )
    t.equal(results.filter((r) => r.status === 'fulfilled').length, 20, 'exactly 20 of 200, across instances')
    const admissions = results.flatMap((r) => (r.status === 'fulfilled' && r.value ? [r.value] : []))
    await Promise.all(admissions.map((a, i) => a.settle({ inputTokens: 5 + i, outputTokens: 2 })))
    const flowed = admissions.reduce((sum, _, i) => sum + 5 + i + 2, 0)
    for (const [i, c] of callers.entries())
      t.same(await c.used(), { requests: 20, tokens: flowed }, `instance ${i} sees the same counters`)
  })
}
