// The anthropic backend's translators on their own: the request out (what is carried, merged
// and refused), the stream in (cut anywhere, usage joined from its two parts, an error event),
// and the errors in (529 is the proxy's 503); reasoning_effort as extended thinking.
import { Readable } from 'node:stream'
import t from 'tap'
import { openAIErrorOf } from '../../src/backends/anthropic/errors-in.ts'
import { messagesRequestOf } from '../../src/backends/anthropic/request-out.ts'
import { ChatStreamTransform } from '../../src/backends/anthropic/stream-in.ts'
import { GatewayError } from '../../src/errors.ts'

const SETTINGS = { defaultMaxTokens: 4096 }

t.test('request out: roles merged, system and developer joined, the default cap, parallel tools off', async (t) => {
  const body = messagesRequestOf(
    {
      model: 'public',
      messages: [
        { role: 'system', content: 'One.' },
        { role: 'developer', content: [{ type: 'text', text: 'Two.' }] },
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
        { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f' } }] },
        { role: 'tool', tool_call_id: 't1', content: 'r1' },
        { role: 'user', content: 'c' },
      ],
      tools: [{ type: 'function', function: { name: 'f' } }],
      parallel_tool_calls: false,
      stream_options: { include_usage: true },
      n: 1,
    },
    'claude-x',
    SETTINGS,
  )
  t.same(body, {
    model: 'claude-x',
    tools: [{ name: 'f', input_schema: { type: 'object', properties: {} } }],
    system: 'One.\n\nTwo.',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'r1' },
          { type: 'text', text: 'c' },
        ],
      },
    ],
    max_tokens: 4096,
    tool_choice: { type: 'auto', disable_parallel_tool_use: true },
  })
})

t.test('request out: what the Messages API cannot do is refused by name', async (t) => {
  const refused = (extra: Record<string, unknown>, content: unknown = 'hi'): string => {
    try {
      messagesRequestOf({ model: 'm', messages: [{ role: 'user', content }], ...extra }, 'm', SETTINGS)
    } catch (err) {
      if (err instanceof GatewayError && err.errorName === 'untranslatable_feature') return err.message
      throw err
    }
    return 'carried'
  }
  t.match(refused({ n: 2 }), /^n is not supported/)
  t.match(refused({ logprobs: true }), /^logprobs/)
  t.match(refused({ seed: 7 }), /^seed/)
  t.match(refused({ frequency_penalty: 0.5 }), /^frequency_penalty/)
  t.match(refused({ response_format: { type: 'json_object' } }), /^response_format/)
  t.match(refused({}, [{ type: 'input_audio', input_audio: { data: '', format: 'wav' } }]), /'input_audio' part/)
  t.equal(refused({ presence_penalty: 0, logprobs: false, response_format: { type: 'text' } }), 'carried')
})

t.test("request out: an OpenAI caller's reasoning_effort is extended thinking, its budget below the cap", async (t) => {
  const out = (extra: Record<string, unknown>) =>
    messagesRequestOf({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra }, 'm', SETTINGS)
  t.same(out({ reasoning_effort: 'medium', max_tokens: 8000 }).thinking, { type: 'enabled', budget_tokens: 4096 })
  t.same(out({ reasoning_effort: 'high' }).thinking, { type: 'enabled', budget_tokens: 4095 }, 'below the default cap')
  t.notOk('thinking' in out({ reasoning_effort: 'none' }))
  const own = { type: 'enabled', budget_tokens: 2000 }
  t.same(out({ reasoning_effort: 'high', thinking: own }).thinking, own, 'thinking asked for itself wins')
  t.throws(() => out({ reasoning_effort: 'low', max_tokens: 800 }), {
    errorName: 'untranslatable_feature',
    message: /at least 1024/,
  })
  t.throws(() => out({ reasoning_effort: 'extreme' }), { errorName: 'invalid_body', message: /reasoning_effort/ })
})

async function translate(events: string, slice: number): Promise<string[]> {
  const bytes = Buffer.from(events)
  const pieces: Buffer[] = []
  for (let at = 0; at < bytes.length; at += slice) pieces.push(bytes.subarray(at, at + slice))
  let out = ''
  for await (const chunk of Readable.from(pieces).pipe(new ChatStreamTransform(1700000000))) out += String(chunk)
  return out
    .split('\n\n')
    .filter((frame) => frame !== '')
    .map((frame) => frame.replace(/^data: /, ''))
}

const sse = (events: Array<Record<string, unknown>>): string =>
  events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`).join('')

t.test("request out: an Anthropic caller's effort and context_management go back as it sent them", async (t) => {
  const out = (chat: Record<string, unknown>): Record<string, unknown> =>
    messagesRequestOf({ messages: [{ role: 'user', content: 'hi' }], ...chat }, 'claude', { defaultMaxTokens: 4096 })
  const context = { edits: [{ type: 'clear_tool_uses_20250919' }] }
  const sent = out({ reasoning_effort: 'low', tollgate_anthropic: { effort: 'low', context_management: context } })
  t.same(sent.output_config, { effort: 'low' }, 'output_config.effort, not a thinking budget')
  t.notOk('thinking' in sent, 'reasoning_effort from effort asks no thinking')
  t.same(sent.context_management, context, 'context_management untouched')
  t.notOk('tollgate_anthropic' in sent, 'the private member stays in the gateway')
  t.notOk('reasoning_effort' in sent)

  const schema = { type: 'object', properties: {} }
  const both = out({
    response_format: { type: 'json_schema', json_schema: { name: 'o', schema } },
    tollgate_anthropic: { effort: 'high' },
    thinking: { type: 'adaptive' },
  })
  t.same(both.output_config, { format: { type: 'json_schema', schema }, effort: 'high' }, 'format and effort together')
  t.same(both.thinking, { type: 'adaptive' }, 'adaptive thinking as it came')
  t.notOk('context_management' in both)

  t.same(
    out({ reasoning_effort: 'medium', max_tokens: 8000 }).thinking,
    { type: 'enabled', budget_tokens: 4096 },
    "an OpenAI caller's reasoning_effort is still a thinking budget",
  )
})

t.test('stream in: cut anywhere, the usage joined; message_delta counts win', async (t) => {
  const events = sse([
    {
      type: 'message_start',
      message: {
        id: 'msg_1',
        model: 'claude-x',
        usage: { input_tokens: 10, cache_creation_input_tokens: 20, cache_read_input_tokens: 30, output_tokens: 1 },
      },
    },
    { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hm' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'ping' },
    { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Hé ✓' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"a":' } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '1}' } },
    { type: 'content_block_stop', index: 2 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 42, input_tokens: 11 } },
    { type: 'message_stop' },
  ])
  for (const slice of [1, 7, 10_000]) {
    const frames = await translate(events, slice)
    t.equal(frames.at(-1), '[DONE]', `slices of ${slice}`)
    const chunks = frames.slice(0, -1).map((f) => JSON.parse(f) as Record<string, unknown>)
    const deltas = chunks.map((c) => (c.choices as Array<{ delta: unknown; finish_reason: unknown }>)[0])
    t.same(
      deltas.map((d) => d?.delta),
      [
        { role: 'assistant', content: '' },
        { reasoning_content: 'hm', thinking_blocks: [{ type: 'thinking', thinking: 'hm' }] },
        { content: 'Hé ✓' },
        { tool_calls: [{ index: 0, id: 'toolu_1', type: 'function', function: { name: 'f', arguments: '' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '{"a":' } }] },
        { tool_calls: [{ index: 0, function: { arguments: '1}' } }] },
        {},
        undefined,
      ],
    )
    t.equal(deltas.at(-2)?.finish_reason, 'tool_calls')
    t.same(chunks.at(-1)?.usage, {
      prompt_tokens: 61,
      completion_tokens: 42,
      total_tokens: 103,
      prompt_tokens_details: { cached_tokens: 30, cache_write_tokens: 20 },
    })
    t.match(chunks[0], { id: 'msg_1', model: 'claude-x', object: 'chat.completion.chunk' })
  }
})

t.test("stream in: an error event is chat's error event, and the end", async (t) => {
  const frames = await translate(
    sse([
      { type: 'message_start', message: { id: 'msg_2', model: 'm', usage: { input_tokens: 1, output_tokens: 1 } } },
      { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
      { type: 'message_stop' },
    ]),
    5,
  )
  t.equal(frames.length, 2)
  t.match(JSON.parse(frames[1] ?? '{}'), { error: { message: 'Overloaded', code: 'overloaded_error' } })
})

t.test('errors in: statuses kept, 529 is 503, the message and type carried', async (t) => {
  const body = (type: string) => ({ type: 'error', error: { type, message: 'why' }, request_id: 'req_1' })
  t.same(openAIErrorOf(529, body('overloaded_error')), {
    status: 503,
    body: { error: { message: 'why', type: 'server_error', param: null, code: 'overloaded_error' } },
  })
  t.equal(openAIErrorOf(429, body('rate_limit_error')).status, 429)
  t.equal(openAIErrorOf(401, body('authentication_error')).body.error.type, 'authentication_error')
  t.match(openAIErrorOf(502, 'not json').body.error, { message: /answered 502/ })
})
