// Issue #36, item 6: drop-in /queue calls that wait for a deployment's capacity resume as
// soon as room exists. Found as a new user would: the built-in mock, `maxConcurrent: 1` on
// one model, three calls at once: one was answered, the other two waited until
// queue.maxWaitMs ended them with 504 while the deployment sat idle.
import t from 'tap'
import { onSharedRedis, startTollgate } from '../helpers/gateway.ts'
import { randomBytes } from 'node:crypto'

const MODEL = 'gpt-4o-mini'

const CASES = [
  { maxConcurrent: 1, redis: false },
  { maxConcurrent: 2, redis: false },
  { maxConcurrent: 2, redis: true },
]

for (const { maxConcurrent, redis } of CASES) {
  t.test(
    `drop-in calls waiting on maxConcurrent ${maxConcurrent} all complete (${redis ? 'Redis' : 'embedded'})`,
    async (t) => {
      const shared = redis ? onSharedRedis(`tgtest:stall:${randomBytes(6).toString('hex')}:`) : {}
      const gw = await startTollgate({
        ...shared,
        config: (doc) => {
          shared.config?.(doc)
          const models = doc.models as Array<{ name: string; deployments: Array<Record<string, unknown>> }>
          const model = models.find((m) => m.name === MODEL)
          if (model === undefined) throw new Error(`no ${MODEL} in the default configuration`)
          model.deployments = [{ backend: 'mock', maxConcurrent }]
          ;(doc.queue as Record<string, unknown>).maxWaitMs = 60_000
          // Slow enough that the calls overlap: each streams its reply over a few hundred ms.
          Object.assign((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}, { tokensPerSecond: 200 })
        },
      })
      t.teardown(() => gw.stop())
      const { key } = await gw.createKey({ name: 'stall', tier: 'Standard1000' })
      const call = async (i: number): Promise<{ status: number; ms: number }> => {
        const started = Date.now()
        const res = await fetch(`${gw.url}/queue/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: MODEL, max_tokens: 60, messages: [{ role: 'user', content: `call ${i}` }] }),
        })
        await res.arrayBuffer()
        return { status: res.status, ms: Date.now() - started }
      }
      t.equal((await call(-1)).status, 200, 'a first call warms the gateway up')
      const results = await Promise.all(Array.from({ length: 3 * maxConcurrent }, (_, i) => call(i)))
      t.same(
        results.map((r) => r.status),
        results.map(() => 200),
        'every call is answered',
      )
      t.comment(`waited ms: ${results.map((r) => r.ms).join(', ')}`)
      // The calls run one batch after another: none waits anywhere near queue.maxWaitMs.
      t.ok(Math.max(...results.map((r) => r.ms)) < 30_000, 'none waited for the queue timeout')
    },
  )
}
