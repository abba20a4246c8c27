// A request that would have the upstream generate after the reply (`background: true` on
// /responses) is refused before it reaches an upstream: the gateway meters a call by its
// reply, so the later work would be charged to no budget and no limit. Driven through the
// openai SDK against a gateway in front of a real upstream.
import OpenAI from 'openai'
import t from 'tap'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

let gw: RunningTollgate
let up: FakeUpstream

t.before(async () => {
  up = await startFakeUpstream()
  gw = await startTollgate({
    config: (doc) => {
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: up.url } }
      doc.models = [...(doc.models as object[]), { name: 'open-model', kind: 'chat', deployments: [{ backend: 'up' }] }]
    },
  })
})
t.teardown(async () => {
  await gw.stop()
  await up.close()
})

t.test('background: true is a 400 saying why, and nothing reaches the upstream', async (t) => {
  const { key, id } = await gw.createKey()
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 2 })
  for (const stream of [false, true]) {
    const error = await client.responses.create({ model: 'open-model', input: 'hi', background: true, stream }).then(
      () => null,
      (err: unknown) => err,
    )
    t.ok(error instanceof OpenAI.BadRequestError, `a 400 (stream ${stream})`)
    const bad = error as InstanceType<typeof OpenAI.BadRequestError>
    t.equal(bad.code, 'unsupported_parameter')
    t.equal(bad.param, 'background')
    t.match(bad.message, 'the gateway cannot meter or charge it')
    t.match(bad.message, "'Prefer: respond-async'")
  }
  t.equal(up.requests.length, 0, 'the upstream saw nothing')
  const logged = await pollUntil(
    async () => gw.logs().filter((l) => l.msg === 'request' && l.keyId === id && l.path === '/v2/responses'),
    (lines) => lines.length >= 2,
  )
  t.same(
    logged.value.map((l) => [l.status, l.error]),
    [
      [400, 'background_not_metered'],
      [400, 'background_not_metered'],
    ],
    'one refusal each, not retried by the SDK',
  )

  const served = await client.responses.create({ model: 'open-model', input: 'hi', background: false })
  t.equal(served.status, 'completed', 'background: false is an ordinary call')
  t.equal(up.requests.length, 1)
})
