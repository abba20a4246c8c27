// The adapter, failover and relay together against the fake upstream: what the gateway's
// request path does, minus authentication and limits.
import t, { type Test } from 'tap'
import { createOpenAIBackend } from '../../src/backends/openai.ts'
import type { BackendAdapter } from '../../src/backends/port.ts'
import { readJsonBody } from '../../src/http/body.ts'
import { sendError } from '../../src/http/reply.ts'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { sendWithFailover } from '../../src/proxy/failover.ts'
import { relay, type RelayOutcome } from '../../src/proxy/relay.ts'
import {
  DEFAULT_REPLY,
  startFakeUpstream,
  type FakeUpstream,
  type FakeUpstreamOptions,
} from '../helpers/fake-upstream.ts'
import { call, dataOf, open, startGateway, upstreamRequestFor } from './gateway-harness.ts'

interface Setup {
  readonly url: string
  readonly upstream: FakeUpstream
  readonly outcomes: RelayOutcome[]
  /** Resolves with the outcome of the nth request once its relay returns. */
  outcome(index: number): Promise<RelayOutcome>
}

async function setup(t: Test, options: FakeUpstreamOptions = {}): Promise<Setup> {
  const upstream = await startFakeUpstream(options)
  t.teardown(() => upstream.close())
  const adapter: BackendAdapter = createOpenAIBackend(
    'fake',
    {
      type: 'openai',
      baseUrl: upstream.url,
      connectTimeoutMs: 1_000,
      responseTimeoutMs: 2_000,
      idleTimeoutMs: 300,
      maxSockets: 8,
      headers: {},
    },
    'sk-upstream',
  )
  t.teardown(() => adapter.close())
  const outcomes: RelayOutcome[] = []
  const gateway = await startGateway(async (req, res) => {
    const { value } = await readJsonBody(req, 1 << 20)
    const stream = value.stream === true
    const options = value.stream_options as { include_usage?: unknown } | undefined
    const clientWantsUsage = options?.include_usage === true
    // As the gateway does: always ask a stream for its usage.
    const body = stream
      ? { ...value, model: 'upstream-model', stream_options: { ...options, include_usage: true } }
      : { ...value, model: 'upstream-model' }
    const controller = new AbortController()
    res.on('close', () => {
      if (!res.writableFinished) controller.abort()
    })
    try {
      const { response } = await sendWithFailover(
        [{ adapter, upstreamModel: 'upstream-model', weight: 1, deploymentIndex: 0 }],
        () =>
          upstreamRequestFor(req, res, {
            path: '/chat/completions',
            body: { kind: 'json', value: body },
            signal: controller.signal,
          }),
      )
      res.setHeader('x-request-id', 'req_gateway')
      outcomes.push(
        await relay(res, response, {
          stream,
          clientWantsUsage,
          promptTokens: async () => 9,
          jsonLimitBytes: 1 << 20,
          signal: controller.signal,
          publicModel: 'public',
        }),
      )
    } catch (err) {
      sendError({ res }, err)
    }
  })
  t.teardown(() => gateway.close())
  return {
    url: gateway.url,
    upstream,
    outcomes,
    async outcome(index) {
      for (let i = 0; i < 400 && outcomes.length <= index; i++) await new Promise((r) => setTimeout(r, 5))
      const outcome = outcomes[index]
      if (outcome === undefined) throw new Error(`no outcome for request ${index}`)
      return outcome
    },
  }
}

const words = DEFAULT_REPLY.match(/\s*\S+/g) ?? []

t.test(
  'a stream whose client did not ask for usage: usage reported to the gateway, hidden from the client',
  async (t) => {
    const s = await setup(t)
    const reply = await call(s.url, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'public', messages: [], stream: true }),
    })
    t.equal(reply.status, 200)
    t.equal(reply.headers['x-request-id'], 'req_gateway')
    const data = dataOf(reply.body)
    t.equal(data.at(-1), '[DONE]')
    t.notMatch(reply.body, /prompt_tokens/)
    t.notMatch(reply.body, /upstream-model/, "no stream event names the upstream's deployment")
    const outcome = await s.outcome(0)
    t.same(outcome.usage, { inputTokens: 17, outputTokens: words.length })
    t.equal(outcome.usageSource, 'reported')
    t.same((s.upstream.requests[0]?.json as { stream_options?: unknown }).stream_options, { include_usage: true })
  },
)

t.test('a stream whose client asked for usage shows it', async (t) => {
  const s = await setup(t)
  const reply = await call(s.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'public', messages: [], stream: true, stream_options: { include_usage: true } }),
  })
  t.match(reply.body, /"prompt_tokens":17/)
  t.equal((await s.outcome(0)).usageSource, 'reported')
})

t.test('an upstream that ignores include_usage is counted', async (t) => {
  const s = await setup(t, { includeUsage: 'never', sliceBytes: 7, lineEnding: '\r\n' })
  const reply = await call(s.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'public', messages: [], stream: true }),
  })
  t.equal(dataOf(reply.body).at(-1), '[DONE]')
  const outcome = await s.outcome(0)
  t.equal(outcome.usageSource, 'counted')
  t.same(outcome.usage, { inputTokens: 9, outputTokens: await countTextTokens(words.join('')) })
})

t.test(
  'a client that leaves mid-stream: the upstream sees the close, usage is counted from what streamed',
  async (t) => {
    const s = await setup(t, { stallAfterEvents: 4 })
    const { req, res } = await open(s.url, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'public', messages: [], stream: true }),
    })
    let received = ''
    for await (const chunk of res as AsyncIterable<Buffer>) {
      received += chunk.toString('utf8')
      if (dataOf(received).length >= 4) break
    }
    req.destroy()
    t.equal(await s.upstream.requests[0]?.ended, 'closed')
    const outcome = await s.outcome(0)
    t.equal(outcome.aborted, true)
    t.equal(outcome.usageSource, 'counted')
    // The first event is the role chunk; the next three carry the first three words.
    t.same(outcome.usage, { inputTokens: 9, outputTokens: await countTextTokens(words.slice(0, 3).join('')) })
  },
)

t.test('an upstream that stalls mid-stream: the idle timeout ends the client stream with an error event', async (t) => {
  const s = await setup(t, { stallAfterEvents: 2 })
  const reply = await call(s.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'public', messages: [], stream: true }),
  })
  t.equal(reply.status, 200)
  t.equal(reply.truncated, false)
  const last = JSON.parse(dataOf(reply.body).at(-1) ?? '{}') as { error?: { code?: string } }
  t.equal(last.error?.code, 'upstream_timeout')
  const outcome = await s.outcome(0)
  t.equal(outcome.error?.errorName, 'upstream_timeout')
  t.same(outcome.usage, { inputTokens: 9, outputTokens: await countTextTokens(words[0] ?? '') })
  t.equal(await s.upstream.requests[0]?.ended, 'closed')
})

t.test('a JSON reply relays with its usage', async (t) => {
  const s = await setup(t)
  const reply = await call(s.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'public', messages: [] }),
  })
  t.equal(reply.status, 200)
  t.equal(reply.headers['content-length'], String(Buffer.byteLength(reply.body)))
  const outcome = await s.outcome(0)
  t.same(outcome.usage, { inputTokens: 17, outputTokens: words.length })
  t.equal((JSON.parse(reply.body) as { model?: string }).model, 'public', 'the client sees the name it asked for')
})

t.test('an upstream 503 with a single deployment reaches the client as the upstream said it', async (t) => {
  const s = await setup(t, { failWith: 503 })
  const reply = await call(s.url, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'public', messages: [] }),
  })
  t.equal(reply.status, 503)
  t.match(reply.body, /fake upstream failure 503/)
  t.equal((await s.outcome(0)).usageSource, 'none')
})
