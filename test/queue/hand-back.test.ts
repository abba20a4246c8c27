// A request leased to a gateway goes to the shared queue before its lease ends, never
// after (issue #25): on the sharded Redis store and BullMQ, with two "instances" (a
// coordinator and a runner each). A held run that must wait while its gateway is closing
// its queues (a stopping gateway whose aborted run ends after the grace) cannot be
// scheduled; its lease must then stay, so that another instance's lease check hands it on.
import t, { type Test } from 'tap'
import { createLogger } from '../../src/observability/logger.ts'
import { createBullmqRunner } from '../../src/queue/bullmq-runner.ts'
import { Coordinator } from '../../src/queue/coordinator.ts'
import type { QueueStore } from '../../src/queue/ports.ts'
import { createRedisQueueStore } from '../../src/queue/redis-store.ts'
import { shardOfId, shardOfKey } from '../../src/queue/shards.ts'
import { localSignals } from '../../src/queue/signals.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { processorParts, type ProcessorParts } from './processor-parts.ts'
import { CONTRACT_SHARDS, newRequest } from './store-contract.ts'

const { fresh } = testNamespace(t, 'handback', 'tgtest-handback')
const log = createLogger('silent')
const RECOVER_AFTER_MS = 2000

/** A key whose requests live on shard `n`. */
function keyOnShard(n: number): string {
  for (let i = 0; ; i++) if (shardOfKey(`key_s${i}`, CONTRACT_SHARDS) === n) return `key_s${i}`
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await check()) return true
    await new Promise((done) => setTimeout(done, 20))
  }
  return check()
}

/** A store on a fresh prefix, closed (and the prefix deleted) when the test ends. */
function sharedStore(t: Test): { store: QueueStore; keyPrefix: string } {
  const { prefix, cleanup } = fresh()
  const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-handback' })
  const store = createRedisQueueStore(redis, prefix, { resultTtlMs: 60_000 }, CONTRACT_SHARDS)
  t.teardown(async () => {
    await store.close()
    await cleanup()
  })
  return { store, keyPrefix: prefix }
}

/** One gateway's queue: a BullMQ runner on every shard, its coordinator and a processor with `parts`. */
function gateway(
  t: Test,
  shared: { store: QueueStore; keyPrefix: string },
  name: string,
  parts: ProcessorParts = {},
  onLeaseRecovered?: () => void,
) {
  const runner = createBullmqRunner({
    redis: REDIS_URL,
    keyPrefix: shared.keyPrefix,
    shards: CONTRACT_SHARDS,
    log,
    commandTimeoutMs: 2000,
    recoverAfterMs: RECOVER_AFTER_MS,
  })
  const coordinator = new Coordinator({
    store: shared.store,
    runner,
    instance: name,
    tierPriority: {},
    log,
    signals: localSignals,
    recoverAfterMs: RECOVER_AFTER_MS,
    ...(onLeaseRecovered === undefined ? {} : { onLeaseRecovered }),
  })
  const { processor, seen, held, metrics } = processorParts(coordinator, parts)
  runner.start(processor, 2)
  t.teardown(async () => {
    await runner.close()
    await coordinator.close()
  })
  return { runner, coordinator, seen, held, metrics }
}

/** A promise and what settles it, for a test to wait on what it does not drive. */
function signal(): { promise: Promise<void>; settle: () => void } {
  let settle: () => void = () => {}
  const promise = new Promise<void>((done) => {
    settle = done
  })
  return { promise, settle }
}

t.test(
  'a held run stopped after its gateway closed its queues keeps its lease; the lease check of another runs it, on its shard',
  async (t) => {
    const shared = sharedStore(t)
    const entered = signal()
    const unwound = signal()
    // The stopping gateway's run is cut at the end of its grace, and takes longer to end
    // than the runner waits for it (a cut stream's tokens counted, its usage written).
    const stopping = gateway(t, shared, 'stopping', {
      upstream: async () => {
        entered.settle()
        await unwound.promise
      },
    })
    const r = newRequest({ keyId: keyOnShard(1) })
    t.equal(shardOfId(r.id), 1, 'its id names shard 1')
    stopping.coordinator.hold(r.id)
    t.equal(await shared.store.submit(r, null, 'stopping'), 0, 'at the head of its line: leased at once')
    const slot = stopping.runner.claim()
    if (slot === null) throw new Error('no free worker')
    const handedBack = signal()
    slot.run(r, stopping.held(r, 'stopping'), async (at) => {
      await stopping.coordinator.handBackHeld(r, at)
      handedBack.settle()
    })
    await entered.promise
    t.equal((await shared.store.get(r.id))?.status, 'in_progress', 'it started, leased to the gateway')

    // Stopped with no grace: the run is aborted, and the runner closes its queues without waiting for it to end.
    await stopping.runner.close(0)
    unwound.settle()
    // It must wait (it was stopped): its hand-back to the shared queue fails, the queues being closed.
    await handedBack.promise
    t.equal((await shared.store.get(r.id))?.runner, 'stopping', 'the lease stays with the stopped gateway')
    t.equal((await shared.store.get(r.id))?.status, 'in_progress')

    // Another gateway's lease check hands it on, the stopped one's heartbeat being gone (it never beat here).
    let recovered = 0
    const other = gateway(t, shared, 'other', {}, () => recovered++)
    await shared.store.heartbeat('other', 60_000)
    await other.coordinator.checkLeases()
    t.ok(
      await until(async () => (await shared.store.get(r.id))?.status === 'completed'),
      "the other gateway's worker ran it, from shard 1's queue",
    )
    const done = await shared.store.get(r.id)
    t.equal(done?.attempts, 2, 'started once there, once here')
    t.equal(done?.runner, null, 'the lease is over')
    t.same(await shared.store.leases(), [])
    t.equal(other.seen.upstream, 1, 'one more upstream call')
    t.equal(recovered, 1, 'the lease was handed on once, and counted')
  },
)
