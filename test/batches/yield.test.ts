// A batch yields to its gateway's clients (priority/client-calls.ts, batches/runner.ts
// busyWindow), on a running gateway in front of an upstream that holds every call until the
// test lets it go: while a client's call is in flight, a batch keeps 2 of its lines going (its
// lines share the process's CPU with the clients' calls); with no client call for a second,
// its whole window. The negative half (no third line while the client's call is held) is
// watched over a bounded stretch of the runner's looks (it looks every 200 ms and when a
// line ends): it can miss a fault, never invent one.
import t from 'tap'
import { batchOf, untilBatch } from '../helpers/batches.ts'
import { startGatedUpstream } from '../helpers/gated-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'gated-model'
const LINES = 8

const up = await startGatedUpstream()
t.teardown(() => up.close())
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), gated: { type: 'openai', baseUrl: up.url } }
    doc.models = [...(doc.models as object[]), { name: MODEL, kind: 'chat', deployments: [{ backend: 'gated' }] }]
  },
})
t.teardown(() => gw.stop())

t.test('a batch keeps 2 lines going while a client call is in flight, its whole window once none is', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const client = sdkClient(gw, key)
  // A client's call, held by the upstream: the gateway is serving a client.
  const held = client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'client' }],
    max_tokens: 4,
  })
  await up.arrived(1)
  const lines = Array.from({ length: LINES }, (_, i) =>
    JSON.stringify({
      custom_id: `l-${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 4 },
    }),
  )
  const batch = await batchOf(client, lines)
  await up.arrived(3)
  const more = await pollUntil(
    async () => up.held(),
    (n) => n > 3,
    60,
    25,
  )
  t.notOk(more.met, `no third line while the client's call is held (${more.value} calls held)`)
  t.equal(up.held(), 3, "the client's call and 2 lines")
  // The client's call ends: a second later the batch takes its whole window (8 lines < 32).
  up.release(1)
  t.equal((await held).choices[0]?.message.content, 'ok', "the client's call was answered")
  up.release()
  await up.arrived(1 + LINES, 20_000)
  t.ok(up.held() > 2, `with no client call, more than 2 lines at once (${up.held()} held)`)
  const done = await untilBatch(client, batch.id, (b) => {
    up.release()
    return b.status === 'completed'
  })
  t.equal(done.request_counts?.completed, LINES, 'every line ran')
})
