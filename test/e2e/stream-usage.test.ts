// The usage a streaming client asked for (stream_options.include_usage), through an
// upstream that sends none: the stream ends with a usage chunk of the gateway's own count,
// in OpenAI's shape. And a stream that is only an upstream's error charges what that
// error reports: nothing.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { DEFAULT_REPLY, startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const schemas = (
  JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/openai/openapi.json'), 'utf8')) as {
    components: { schemas: Record<string, { required: string[] }> }
  }
).components.schemas

interface Totals {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
}

async function totals(gw: RunningTollgate, id: string): Promise<Totals> {
  const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  return ((await res.json()) as { totals: Totals }).totals
}

const upstream = await startFakeUpstream({ includeUsage: 'never' })
t.teardown(() => upstream.close())
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
  },
})
t.teardown(() => gw.stop())

t.test('include_usage through an upstream that sends no usage: the last chunk is the gateway’s count', async (t) => {
  const { key, id } = await gw.createKey({ tier: 'Standard4000' })
  const stream = await sdkClient(gw, key).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
  })
  const chunks: Array<Record<string, unknown>> = []
  for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, unknown>)
  const last = chunks.at(-1) ?? {}
  const usage = last.usage as Record<string, number> | undefined
  t.ok(usage, 'the stream ends with a usage chunk')
  t.same(last.choices, [], 'with no choices, as OpenAI sends it')
  for (const field of schemas.CreateChatCompletionStreamResponse?.required ?? []) t.ok(field in last, `it has ${field}`)
  for (const field of schemas.CompletionUsage?.required ?? []) t.type(usage?.[field], 'number', `usage.${field}`)
  t.equal(last.model, MODEL, 'it names the model the client asked for')
  t.equal(last.id, chunks[0]?.id, "the stream's id")
  const outputTokens = await countTextTokens(DEFAULT_REPLY)
  t.equal(usage?.completion_tokens, outputTokens, 'the output the gateway counted')
  t.equal(usage?.total_tokens, (usage?.prompt_tokens ?? 0) + outputTokens)
  t.equal(chunks.filter((c) => c.usage !== undefined && c.usage !== null).length, 1, 'exactly one usage chunk')
  const { value: metered } = await pollUntil(
    () => totals(gw, id),
    (now) => now.requests === 1,
  )
  t.same(
    { input: metered.input_tokens, output: metered.output_tokens },
    { input: usage?.prompt_tokens, output: usage?.completion_tokens },
    'what the client was told is what was charged',
  )
})

t.test('a client that did not ask for usage still gets none', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const stream = await sdkClient(gw, key).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
  })
  const chunks: Array<Record<string, unknown>> = []
  for await (const chunk of stream) chunks.push(chunk as unknown as Record<string, unknown>)
  t.ok(chunks.length > 1)
  t.notOk(
    chunks.some((c) => c.usage !== undefined && c.usage !== null),
    'no usage chunk',
  )
})

for (const { name, event, charged } of [
  {
    name: 'a stream that is only an upstream error is charged nothing',
    event: { error: { message: 'the model is loading', type: 'server_error', code: null } },
    charged: { input: 0, output: 0 },
  },
  {
    name: 'a stream that is only an upstream error reporting usage is charged what it reports',
    event: {
      error: { message: 'the model stopped', type: 'server_error', code: null },
      usage: { prompt_tokens: 13, completion_tokens: 2, total_tokens: 15 },
    },
    charged: { input: 13, output: 2 },
  },
]) {
  t.test(name, async (t) => {
    upstream.options.onlyEvent = event
    t.teardown(() => {
      delete upstream.options.onlyEvent
    })
    const { key, id } = await gw.createKey({ tier: 'Standard4000' })
    const failed = await sdkClient(gw, key)
      .chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'a prompt of some length that would be charged as input' }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .then(async (stream) => {
        for await (const _ of stream) void _
      })
      .catch((e: unknown) => e)
    t.match(String(failed), event.error.message, 'the client got the error')
    const { value: metered } = await pollUntil(
      () => totals(gw, id),
      (now) => now.requests === 1,
    )
    t.same({ input: metered.input_tokens, output: metered.output_tokens }, charged)
  })
}
