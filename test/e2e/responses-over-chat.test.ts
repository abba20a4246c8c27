// The Responses API on a running gateway whose models are deployed on a backend that speaks
// only chat completions (an anthropic one here), alone and mixed with an OpenAI deployment:
// what cannot be translated is refused before it is admitted (nothing sent, nothing charged,
// the key's request left whole); a model with both kinds answers every call as the
// Responses API, from either deployment, and fails over between them. The matrix
// (protocol-matrix.test.ts) holds each feature on each upstream.
import OpenAI from 'openai'
import t from 'tap'
import { startFakeAnthropic } from '../helpers/fake-anthropic.ts'
import { startFakeUpstream, DEFAULT_REPLY } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const claude = await startFakeAnthropic()
t.teardown(() => claude.close())
const gpt = await startFakeUpstream()
t.teardown(() => gpt.close())
const u = claude.options.usage
const CLAUDE_USAGE = {
  input_tokens: u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens,
  output_tokens: u.output_tokens,
}
const GPT_USAGE = { input_tokens: 17, output_tokens: DEFAULT_REPLY.match(/\s*\S+/g)?.length ?? 0 }

const gw = await startTollgate({
  env: { CLAUDE_KEY: claude.options.apiKey },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      claude: { type: 'anthropic', baseUrl: claude.url, apiKeyEnv: 'CLAUDE_KEY' },
      gpt: { type: 'openai', baseUrl: gpt.url },
    }
    const models = doc.models as unknown[]
    models.push({ name: 'claude-only', kind: 'chat', deployments: [{ backend: 'claude', model: 'claude-x' }] })
    models.push({
      name: 'mixed',
      kind: 'chat',
      deployments: [
        { backend: 'gpt', model: 'gpt-x' },
        { backend: 'claude', model: 'claude-x' },
      ],
    })
  },
})
t.teardown(() => gw.stop())

async function keyed(): Promise<{ id: string; openai: OpenAI }> {
  const { key, id } = await gw.createKey({ tier: 'Standard4000' })
  return { id, openai: new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0 }) }
}

async function metered(
  id: string,
  requests: number,
): Promise<{ requests: number; input_tokens: number; output_tokens: number }> {
  const polled = await pollUntil(
    async () => {
      const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, {
        headers: { authorization: `Bearer ${gw.adminToken}` },
      })
      return ((await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } })
        .totals
    },
    (totals) => totals.requests >= requests,
    600,
    20,
  )
  return polled.value
}

t.test('what a chat-only upstream cannot do is refused before admission: nothing sent, nothing charged', async (t) => {
  const { id, openai } = await keyed()
  const before = claude.requests.length
  const refusals: Array<[Partial<OpenAI.Responses.ResponseCreateParamsNonStreaming>, string]> = [
    [{ tools: [{ type: 'web_search' }] }, 'tools[0]'],
    [{ previous_response_id: 'resp_123' }, 'previous_response_id'],
    [{ store: true }, 'store'],
  ]
  const remaining: string[] = []
  for (const [extra, param] of refusals) {
    const err = await openai.responses
      .create({ model: 'claude-only', input: 'Hi', max_output_tokens: 32, ...extra })
      .catch((e: unknown) => e)
    t.ok(err instanceof OpenAI.BadRequestError, `${param}: a 400`)
    const error = err as InstanceType<typeof OpenAI.APIError>
    t.equal(error.code, 'unsupported_parameter')
    t.equal(error.param, param)
    t.match(error.message, /speaks chat completions and not the Responses API/)
    remaining.push(String(error.headers?.get('x-ratelimit-remaining-requests')))
  }
  t.ok(Number(remaining[0]) > 0, 'the refusal tells the key where its limits stand')
  t.same(new Set(remaining).size, 1, 'and no refusal took a request from them')
  t.equal(claude.requests.length, before, 'the upstream was sent nothing')
  const ok = await openai.responses.create({ model: 'claude-only', input: 'Hi', max_output_tokens: 32, store: false })
  t.equal(ok.output_text, claude.options.replyText)
  t.match(ok.usage, CLAUDE_USAGE)
  t.match(await metered(id, 1), { requests: 1, ...CLAUDE_USAGE }, 'only the call that ran is metered')
})

t.test(
  'a model on both kinds: every reply is the Responses API, from either deployment, metered as it reported',
  async (t) => {
    const { id, openai } = await keyed()
    const gptBefore = gpt.requests.length
    const claudeBefore = claude.requests.length
    const replies = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        if (i % 2 === 0) return openai.responses.create({ model: 'mixed', input: `Hi ${i}`, max_output_tokens: 32 })
        // Read unchecked: the fake OpenAI upstream streams only the events that carry text.
        const raw = await openai.responses.create({
          model: 'mixed',
          input: `Hi ${i}`,
          max_output_tokens: 32,
          stream: true,
        })
        let text = ''
        let done: OpenAI.Responses.Response | undefined
        for await (const event of raw) {
          if (event.type === 'response.output_text.delta') text += event.delta
          if (event.type === 'response.completed') done = event.response
        }
        if (done === undefined) throw new Error('no response.completed')
        return { ...done, output_text: text }
      }),
    )
    const fromGpt = gpt.requests.length - gptBefore
    const fromClaude = claude.requests.length - claudeBefore
    t.ok(fromGpt > 0 && fromClaude > 0, `both deployments served (${fromGpt} openai, ${fromClaude} anthropic)`)
    t.equal(
      gpt.requests.slice(gptBefore).every((r) => r.path === '/v1/responses'),
      true,
      'the OpenAI deployment is sent the Responses request as it came',
    )
    let input = 0
    let output = 0
    for (const reply of replies) {
      t.equal(reply.object, 'response')
      const text = reply.output_text
      t.ok(text === claude.options.replyText || text === DEFAULT_REPLY, `a reply from one of them: ${text}`)
      t.match(reply.usage, text === DEFAULT_REPLY ? GPT_USAGE : CLAUDE_USAGE, 'its usage is the one that served it')
      input += reply.usage?.input_tokens ?? 0
      output += reply.usage?.output_tokens ?? 0
    }
    t.match(await metered(id, replies.length), { requests: replies.length, input_tokens: input, output_tokens: output })
  },
)

t.test('a model on both kinds fails over between them, translating where it lands', async (t) => {
  const { openai } = await keyed()
  t.teardown(() => {
    delete gpt.options.failWith
    delete claude.options.failWith
  })
  gpt.options.failWith = 500
  for (let i = 0; i < 3; i++) {
    const reply = await openai.responses.create({ model: 'mixed', input: 'Hi', max_output_tokens: 32 })
    t.equal(reply.output_text, claude.options.replyText, 'the OpenAI deployment fails: the anthropic one answers')
  }
  delete gpt.options.failWith
  claude.options.failWith = { status: 500, type: 'api_error' }
  for (let i = 0; i < 3; i++) {
    const reply = await openai.responses.create({ model: 'mixed', input: 'Hi', max_output_tokens: 32 })
    t.equal(reply.output_text, DEFAULT_REPLY, 'the anthropic deployment fails: the OpenAI one answers')
  }
})

t.test('what one deployment of a mixed model cannot be asked for is refused for the model', async (t) => {
  const { openai } = await keyed()
  const before = gpt.requests.length
  const err = await openai.responses
    .create({ model: 'mixed', input: 'Hi', tools: [{ type: 'web_search' }] })
    .catch((e: unknown) => e)
  t.ok(err instanceof OpenAI.BadRequestError)
  t.equal((err as InstanceType<typeof OpenAI.APIError>).param, 'tools[0]')
  t.equal(gpt.requests.length, before, 'not even the deployment that could have taken it is sent it')
})
