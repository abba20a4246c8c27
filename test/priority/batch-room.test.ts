// A batch line's room (src/priority/batch-room.ts): the whole of its key's limits while no
// other call of the key and model asked within the last window, flex's share while one did;
// on a memory limiter with a 20-request window, so a quiet key's batch takes all 20. On
// Redis, every instance's asks count (redis-asks.ts).
import t, { type Test } from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import type { AdmissionRequest, Limiter } from '../../src/limits/port.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { withBatchRoom } from '../../src/priority/batch-room.ts'
import { classLimits } from '../../src/priority/classes.ts'
import { redisAskBoard } from '../../src/priority/redis-asks.ts'
import { whenReady } from '../../src/store/redis-client.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'

const WINDOW = 60_000
const resolved = { tier: 'T', model: 'm', limits: { rpm: 20 } }
const shared = classLimits(resolved, 'flex', undefined).limits

function request(keyId: string, batch: boolean): AdmissionRequest {
  return {
    keyId,
    tier: 'T',
    model: 'm',
    limits: batch ? shared : resolved.limits,
    ...(batch ? { idleLimits: resolved.limits, serviceClass: 'flex' as const } : {}),
    estimate: { inputTokens: 1, outputTokens: 1 },
  }
}

/** How many of `n` admissions of `req` the limiter grants. */
async function granted(limiter: Limiter, req: AdmissionRequest, n: number): Promise<number> {
  let ok = 0
  for (let i = 0; i < n; i++) {
    try {
      await limiter.admit(req)
      ok++
    } catch {
      // refused: the window is spent for it
    }
  }
  return ok
}

function setup(t: Test): { limiter: Limiter; clock: { at: number } } {
  const inner = createLimiter({ log: createLogger('silent'), windowMs: WINDOW })
  t.teardown(() => inner.close())
  const clock = { at: 1_000_000 }
  return { limiter: withBatchRoom(inner, { windowMs: WINDOW, now: () => clock.at }), clock }
}

t.test("a quiet key's batch takes every request of the window", async (t) => {
  const { limiter } = setup(t)
  t.equal(shared.rpm, 16, "flex's share of 20")
  t.equal(await granted(limiter, request('quiet', true), 25), 20, '20 lines in one window, not 16')
})

t.test('while interactive calls want room, the batch keeps to the share and they are admitted', async (t) => {
  const { limiter } = setup(t)
  t.equal(await granted(limiter, request('busy', false), 1), 1, 'an interactive call')
  t.equal(await granted(limiter, request('busy', true), 25), 15, 'the batch: up to 16 of the window, with it')
  t.equal(await granted(limiter, request('busy', false), 4), 4, 'the rest stays for interactive calls')
  t.equal(await granted(limiter, request('busy', false), 1), 0, 'and then the window is spent')
})

t.test('an interactive ask holds the share for one window; other keys and models leave a key quiet', async (t) => {
  const { limiter, clock } = setup(t)
  await granted(limiter, request('earlier', false), 1)
  clock.at += WINDOW
  t.equal(
    await granted(limiter, request('earlier', true), 25),
    19,
    'a window after its last interactive call: all the rest',
  )
  await granted(limiter, { ...request('a', false), keyId: 'b' }, 1)
  t.equal(await granted(limiter, request('a', true), 25), 20, "another key's calls leave this key quiet")
  await granted(limiter, { ...request('c', false), model: 'other' }, 1)
  t.equal(await granted(limiter, request('c', true), 25), 20, "another model's calls too")
})

t.test("on Redis, another instance's interactive calls count too", async (t) => {
  const inner = createLimiter({ log: createLogger('silent'), windowMs: WINDOW })
  t.teardown(() => inner.close())
  const ns = testNamespace(t, 'batch-room', 'tgtest-batch-room')
  const { prefix, cleanup } = ns.fresh()
  t.teardown(cleanup)
  await whenReady(ns.admin)
  // Two instances over one limiter's counters (as on Redis), each with its own view and the board.
  const a = withBatchRoom(inner, { windowMs: WINDOW, shared: redisAskBoard(ns.admin, prefix, WINDOW) })
  const b = withBatchRoom(inner, { windowMs: WINDOW, shared: redisAskBoard(ns.admin, prefix, WINDOW) })
  t.equal(await granted(a, request('shared', false), 1), 1, 'an interactive call on instance A')
  t.equal(await granted(b, request('shared', true), 25), 15, "B's batch keeps to the share")
  t.equal(await granted(b, request('quiet-too', true), 25), 20, 'a quiet key on B: the whole window')

  const writer = redisAskBoard(ns.admin, prefix, 300)
  // A reader per look: a board keeps its answers an eighth of a window.
  const read = (model: string, keyId = 'k') => redisAskBoard(ns.admin, prefix, 300).asked({ keyId, owner: 'o' }, model)
  writer.note({ keyId: 'k', owner: 'o' }, 'm')
  t.ok(
    (
      await pollUntil(
        () => read('m'),
        (x) => x,
        100,
        10,
      )
    ).met,
    'noted',
  )
  t.notOk(await read('other'), 'another model: not')
  t.ok(
    (
      await pollUntil(
        () => read('m'),
        (x) => !x,
        200,
        20,
      )
    ).met,
    'gone a window on',
  )
  const clock = { at: 0 }
  const cached = redisAskBoard(ns.admin, prefix, 800, () => clock.at)
  t.notOk(await cached.asked({ keyId: 'c', owner: 'o' }, 'm'), 'quiet')
  writer.note({ keyId: 'c', owner: 'o' }, 'm')
  t.ok(
    (
      await pollUntil(
        () => read('m', 'c'),
        (x) => x,
        100,
        10,
      )
    ).met,
    'then noted',
  )
  t.notOk(await cached.asked({ keyId: 'c', owner: 'o' }, 'm'), 'the answer is kept for an eighth of a window')
  clock.at += 100
  t.ok(await cached.asked({ keyId: 'c', owner: 'o' }, 'm'), 'then read again')
  const down = redisAskBoard(
    { exists: () => Promise.reject(new Error('down')), set: () => Promise.reject(new Error('down')) } as never,
    prefix,
    WINDOW,
  )
  down.note({ keyId: 'k' }, 'm')
  t.ok(await down.asked({ keyId: 'k' }, 'm'), 'a Redis that does not answer counts as an ask: the share holds')
})
