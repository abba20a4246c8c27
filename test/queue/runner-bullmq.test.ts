// The job runner contract on BullMQ (the shared Redis, a random prefix deleted at the
// end), unsharded (as the webhooks use it) and sharded (as the queue does), and what only
// it does: a request scheduled by one instance runs on another; the jobs a gateway of the
// unsharded layout left behind still run.
import t from 'tap'
import { createRequire } from 'node:module'
import type * as BullMQ from 'bullmq'
import { createBullmqRunner } from '../../src/queue/bullmq-runner.ts'
import type { JobRunner } from '../../src/queue/ports.ts'
import { newRequestId, shardOfId, shardOfKey } from '../../src/queue/shards.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { runnerContract } from './runner-contract.ts'
import { openInFreshSpace } from './spaces.ts'

const { namespace: NAMESPACE, admin, fresh } = testNamespace(t, 'runner', 'tgtest-runner')
const log = createLogger('silent')
const SHARDS = 4

const spaceWith = (shards: number | undefined) => async () => {
  const { prefix: keyPrefix, cleanup } = fresh()
  return {
    keyPrefix,
    open: async (): Promise<JobRunner> =>
      createBullmqRunner({
        redis: REDIS_URL,
        keyPrefix,
        log,
        commandTimeoutMs: 2000,
        ...(shards === undefined ? {} : { shards }),
      }),
    cleanup,
    // Sharded: each job is in its shard's active list once a worker of the runner took it.
    ...(shards === undefined
      ? {}
      : {
          spread: (name: string, n: number): string => `qreq_${name.padEnd(16, '0')}s${n % shards}`,
          held: async (ids: readonly string[], ms: number): Promise<boolean> => {
            const activeOf = (id: string): string =>
              `${keyPrefix}{q${shardOfId(id) ?? shardOfKey(id, shards)}}:bull:requests:active`
            const deadline = Date.now() + ms
            for (;;) {
              const lists = await Promise.all(ids.map((id) => admin.lrange(activeOf(id), 0, -1)))
              if (ids.every((id, n) => lists[n]?.includes(id))) {
                // Redis moved each job to active before it answered this: the worker's reply
                // (whose handling, without I/O, puts the job among those waiting for a worker)
                // was written before the answer to a command sent now, so it has been read
                // by the time that answer is.
                await admin.ping()
                return true
              }
              if (Date.now() > deadline) return false
              await new Promise((done) => setTimeout(done, 20))
            }
          },
        }),
  }
}
const space = spaceWith(undefined)
const sharded = spaceWith(SHARDS)

runnerContract(t, 'bullmq', space)
runnerContract(t, 'bullmq sharded', sharded)

const until = async (check: () => boolean): Promise<boolean> => {
  for (let i = 0; i < 250 && !check(); i++) await new Promise((done) => setTimeout(done, 20))
  return check()
}

t.test('bullmq: a request scheduled by one instance runs on another; keys stay under {tg}', async (t) => {
  const {
    opened: [accepting, working],
  } = await openInFreshSpace(t, space, async (s) => [await s.open(), await s.open()])
  const ran: string[] = []
  await accepting.schedule({ id: 'r1', line: 'key_x:m', createdAt: 5 })
  await accepting.close()
  working.start(async (request) => {
    ran.push(`${request.id} ${request.line} ${request.createdAt}`)
    return { kind: 'done' }
  }, 2)
  t.ok(await until(() => ran.length > 0))
  t.same(ran, ['r1 key_x:m 5'])
  for (const key of await keysUnder(admin, NAMESPACE)) t.match(key, /:\{tg\}:bull:requests:/)
})

t.test(
  "bullmq sharded: each request's job is on the queue of the shard its id names; one instance runs every shard",
  async (t) => {
    const {
      opened: [accepting, working],
    } = await openInFreshSpace(t, sharded, async (s) => [await s.open(), await s.open()])
    const ids = Array.from({ length: SHARDS }, (_, n) => newRequestId(n))
    for (const id of ids) await accepting.schedule({ id, line: 'key_x:m', createdAt: 5 }, { delayMs: 60_000 })
    const keys = await keysUnder(admin, NAMESPACE)
    for (const [n, id] of ids.entries())
      t.ok(
        keys.some((key) => key.endsWith(`:{q${n}}:bull:requests:${id}`)),
        `the job of ${id} on {q${n}}`,
      )
    for (const key of keys) t.match(key, /:\{q\d\}:bull:requests:/)
    const ran: string[] = []
    working.start(async (request) => {
      ran.push(request.id)
      return { kind: 'done' }
    }, 2)
    for (const id of ids) await accepting.wake(id)
    t.ok(await until(() => ran.length === SHARDS), 'woken on every shard, run by the one worker')
    t.same([...ran].sort(), [...ids].sort())
  },
)

t.test('bullmq sharded: jobs left in the unsharded queue ({tg}) by an earlier version still run', async (t) => {
  const { space: s } = await openInFreshSpace(t, sharded, async () => [] as const)
  // What the gateway before sharding left: a job in `<prefix>{tg}:bull`, queue "requests".
  const { Queue } = createRequire(import.meta.url)('bullmq') as typeof BullMQ
  const old = new Queue('requests', { prefix: `${s.keyPrefix}{tg}:bull`, connection: { url: REDIS_URL } })
  await old.add('run', { line: 'key_old:m', createdAt: 7 }, { jobId: 'qreq_oldlayout0000000' })
  await old.close()
  const runner = await s.open()
  t.teardown(() => runner.close())
  const ran: string[] = []
  runner.start(async (request) => {
    ran.push(`${request.id} ${request.line} ${request.createdAt}`)
    return { kind: 'done' }
  }, 2)
  t.ok(await until(() => ran.length > 0), 'the old job ran')
  t.same(ran, ['qreq_oldlayout0000000 key_old:m 7'])
})
