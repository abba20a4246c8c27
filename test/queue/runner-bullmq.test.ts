// The job runner contract on BullMQ (the shared Redis, a random prefix deleted at the
// end), and what only it does: a request scheduled by one instance runs on another.
import t from 'tap'
import { createBullmqRunner } from '../../src/queue/bullmq-runner.ts'
import type { JobRunner } from '../../src/queue/ports.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { runnerContract } from './runner-contract.ts'
import { openInFreshSpace } from './spaces.ts'

const { namespace: NAMESPACE, admin, fresh } = testNamespace(t, 'runner', 'tgtest-runner')
const log = createLogger('silent')

const space = async () => {
  const { prefix: keyPrefix, cleanup } = fresh()
  return {
    open: async (): Promise<JobRunner> =>
      createBullmqRunner({ redis: REDIS_URL, keyPrefix, log, commandTimeoutMs: 2000 }),
    cleanup,
  }
}

runnerContract(t, 'bullmq', space)

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
  for (let i = 0; i < 200 && ran.length === 0; i++) await new Promise((done) => setTimeout(done, 20))
  t.same(ran, ['r1 key_x:m 5'])
  for (const key of await keysUnder(admin, NAMESPACE)) t.match(key, /:\{tg\}:bull:requests:/)
})
