// Chat completion chunks → Anthropic's event sequence (src/protocols/anthropic/stream-out.ts),
// and errors in Anthropic's shape (errors.ts).
import t from 'tap'
import { gatewayError } from '../../src/errors.ts'
import { anthropicErrorOf, anthropicErrorOfBody } from '../../src/protocols/anthropic/errors.ts'
import { AnthropicStream } from '../../src/protocols/anthropic/stream-out.ts'

interface Event {
  event: string
  data: Record<string, unknown> & { type: string }
}

function events(text: string): Event[] {
  return [...text.matchAll(/^event: (\w+)\ndata: (.*)\n\n/gm)].map((m) => ({
    event: m[1] ?? '',
    data: JSON.parse(m[2] ?? '{}') as Event['data'],
  }))
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
  JSON.stringify({ id: 'c1', model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })

t.test('text, then two tool calls with streamed arguments, then usage', async (t) => {
  const s = new AnthropicStream('req_1')
  const out = [
    chunk({ role: 'assistant', content: '' }),
    chunk({ content: 'Let me ' }),
    chunk({ content: 'check.' }),
    chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'f', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '1}' } }] }),
    chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'g', arguments: '{}' } }] }),
    chunk({}, 'tool_calls'),
    JSON.stringify({
      id: 'c1',
      choices: [],
      usage: { prompt_tokens: 50, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 20 } },
    }),
    '[DONE]',
  ]
    .map((d) => s.data(d))
    .join('')
  const seen = events(out)
  t.ok(
    seen.every((e) => e.event === e.data.type),
    'event names match their types',
  )
  t.same(
    seen.map((e) =>
      e.data.type === 'content_block_delta' ? `delta:${(e.data.delta as { type: string }).type}` : e.event,
    ),
    [
      'message_start',
      'ping',
      'content_block_start',
      'delta:text_delta',
      'delta:text_delta',
      'content_block_stop',
      'content_block_start',
      'delta:input_json_delta',
      'delta:input_json_delta',
      'content_block_stop',
      'content_block_start',
      'delta:input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ],
  )
  const starts = seen.filter((e) => e.event === 'content_block_start').map((e) => [e.data.index, e.data.content_block])
  t.same(starts, [
    [0, { type: 'text', text: '', citations: null }],
    [1, { type: 'tool_use', id: 'call_a', name: 'f', input: {}, caller: { type: 'direct' } }],
    [2, { type: 'tool_use', id: 'call_b', name: 'g', input: {}, caller: { type: 'direct' } }],
  ])
  const delta = seen.find((e) => e.event === 'message_delta')?.data
  t.same(delta?.delta, { stop_reason: 'tool_use', stop_sequence: null, stop_details: null })
  t.same(delta?.usage, {
    input_tokens: 30,
    output_tokens: 7,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 20,
  })
  t.equal(s.data('[DONE]') + s.end(), '', 'nothing after the end')
})

t.test('a stream that ends without [DONE] still closes; one that breaks off ends with an error event', async (t) => {
  const s = new AnthropicStream('req_2')
  const head = s.data(chunk({ content: 'hi' }))
  t.ok(head.startsWith('event: message_start'))
  const tail = events(s.end())
  t.same(
    tail.map((e) => e.event),
    ['content_block_stop', 'message_delta', 'message_stop'],
  )
  t.equal((tail[1]?.data.delta as { stop_reason: string }).stop_reason, 'end_turn')

  const broken = new AnthropicStream('req_3')
  broken.data(chunk({ content: 'hi' }))
  const error = events(broken.data(JSON.stringify({ error: { message: 'upstream went away', type: 'server_error' } })))
  t.same(error, [
    { event: 'error', data: { type: 'error', error: { type: 'api_error', message: 'upstream went away' } } },
  ])
  t.equal(broken.end(), '', 'no message_stop after an error')
})

t.test("errors: Anthropic's types, 529 for an overloaded service", async (t) => {
  const of = (name: Parameters<typeof gatewayError>[0]): [number, string] => {
    const e = anthropicErrorOf(gatewayError(name), 'req')
    return [e.status, e.body.error.type]
  }
  t.same(of('invalid_body'), [400, 'invalid_request_error'])
  t.same(of('untranslatable_feature'), [400, 'invalid_request_error'])
  t.same(of('invalid_api_key'), [401, 'authentication_error'])
  t.same(of('model_not_allowed'), [403, 'permission_error'])
  t.same(of('model_not_found'), [404, 'not_found_error'])
  t.same(of('body_too_large'), [413, 'request_too_large'])
  t.same(of('rate_limit_requests'), [429, 'rate_limit_error'])
  t.same(of('budget_exhausted'), [429, 'rate_limit_error'])
  t.same(of('upstream_capacity'), [529, 'overloaded_error'], 'every deployment full: not the caller’s limit')
  t.same(of('store_unavailable'), [529, 'overloaded_error'])
  t.same(of('internal'), [500, 'api_error'])
  t.same(of('upstream_unreachable'), [502, 'api_error'])
  t.same(of('upstream_timeout'), [504, 'timeout_error'])
  const e = anthropicErrorOf(gatewayError('invalid_body', { message: 'nope' }), 'req_9')
  t.same(e.body, { type: 'error', error: { type: 'invalid_request_error', message: 'nope' }, request_id: 'req_9' })
  t.same(anthropicErrorOfBody(503, { error: { message: 'busy' } }, 'r'), {
    status: 529,
    body: { type: 'error', error: { type: 'overloaded_error', message: 'busy' }, request_id: 'r' },
  })
})

t.test(
  "an anthropic backend's thinking pieces become signed thinking blocks; reasoning_content alone shows nothing",
  async (t) => {
    const s = new AnthropicStream('req_3')
    const out = [
      chunk({ role: 'assistant', content: '' }),
      chunk({ reasoning_content: 'plain reasoning' }),
      chunk({ reasoning_content: 'Hm', thinking_blocks: [{ type: 'thinking', thinking: 'Hm' }] }),
      chunk({ thinking_blocks: [{ type: 'thinking', thinking: '', signature: 'sig1' }] }),
      chunk({ thinking_blocks: [{ type: 'redacted_thinking', data: 'opaque' }] }),
      chunk({ content: 'Done.' }),
      chunk({}, 'stop'),
      '[DONE]',
    ]
      .map((d) => s.data(d))
      .join('')
    const seen = events(out).filter((e) => e.event.startsWith('content_block'))
    t.same(
      seen.map((e) => e.data),
      [
        { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'Hm' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'sig1' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'content_block_start', index: 1, content_block: { type: 'redacted_thinking', data: 'opaque' } },
        { type: 'content_block_stop', index: 1 },
        { type: 'content_block_start', index: 2, content_block: { type: 'text', text: '', citations: null } },
        { type: 'content_block_delta', index: 2, delta: { type: 'text_delta', text: 'Done.' } },
        { type: 'content_block_stop', index: 2 },
      ],
    )
  },
)
