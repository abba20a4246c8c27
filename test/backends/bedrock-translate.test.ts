// The bedrock backend's translations, piece by piece: what a chat completions body becomes
// as a Converse request (and what is refused), Bedrock's exception names as the corridor's
// statuses, stop reasons, and the event-stream reader fed the way a socket feeds it (a
// message split anywhere, a corrupt one).
import { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import t from 'tap'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { fromUtf8, toUtf8 } from '@smithy/core/serde'
import { GatewayError } from '../../src/errors.ts'
import { bedrockErrorOf } from '../../src/backends/bedrock/errors-in.ts'
import { chatCompletionOf, finishReasonOf } from '../../src/backends/bedrock/reply-in.ts'
import { converseRequestOf } from '../../src/backends/bedrock/request-out.ts'
import { ChatStreamTransform, EventStreamReader } from '../../src/backends/bedrock/stream-in.ts'

const codec = new EventStreamCodec(toUtf8, fromUtf8)
const event = (type: string, payload: unknown): Uint8Array =>
  codec.encode({
    headers: {
      ':event-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body: Buffer.from(JSON.stringify(payload)),
  })

t.test(
  'request: turns merged and alternating, tool results in a user turn, thinking blocks back as reasoningContent',
  async (t) => {
    const body = converseRequestOf({
      model: 'x',
      messages: [
        { role: 'system', content: 'One.' },
        { role: 'developer', content: [{ type: 'text', text: 'Two.' }] },
        { role: 'user', content: 'Hi' },
        { role: 'user', content: 'Again' },
        {
          role: 'assistant',
          content: null,
          thinking_blocks: [
            { type: 'thinking', thinking: 'Hmm.', signature: 'sig' },
            { type: 'redacted_thinking', data: 'cmVkYWN0ZWQ=' },
          ],
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
        },
        { role: 'tool', tool_call_id: 'call_1', content: 'done' },
        { role: 'tool', tool_call_id: 'call_2', content: 'also' },
      ],
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      top_k: 5,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      max_completion_tokens: 300,
      stream: true,
      stream_options: { include_usage: true },
      user: 'someone',
      n: 1,
    })
    t.same(body, {
      messages: [
        { role: 'user', content: [{ text: 'Hi' }, { text: 'Again' }] },
        {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'Hmm.', signature: 'sig' } } },
            { reasoningContent: { redactedContent: 'cmVkYWN0ZWQ=' } },
            { toolUse: { toolUseId: 'call_1', name: 'f', input: { a: 1 } } },
          ],
        },
        {
          role: 'user',
          content: [
            { toolResult: { toolUseId: 'call_1', content: [{ text: 'done' }] } },
            { toolResult: { toolUseId: 'call_2', content: [{ text: 'also' }] } },
          ],
        },
      ],
      system: [{ text: 'One.' }, { text: 'Two.' }],
      inferenceConfig: { maxTokens: 300 },
      toolConfig: {
        tools: [{ toolSpec: { name: 'f', inputSchema: { json: { type: 'object' } }, strict: true } }],
        toolChoice: { tool: { name: 'f' } },
      },
      additionalModelRequestFields: { top_k: 5, thinking: { type: 'enabled', budget_tokens: 2000 } },
    })
  },
)

t.test('request: what Converse cannot do is refused by name, a malformed body is invalid', async (t) => {
  const base = { model: 'x', messages: [{ role: 'user', content: 'Hi' }] }
  for (const [extra, name] of [
    [{ n: 2 }, 'n'],
    [{ seed: 1 }, 'seed'],
    [{ presence_penalty: 0.5 }, 'presence_penalty'],
    [{ reasoning_effort: 'high' }, 'reasoning_effort'],
    [{ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: 'none' }, "tool_choice 'none'"],
    [
      {
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/bmp;base64,AA==' } }] },
        ],
      },
      'image/bmp',
    ],
    [{ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: {} }] }] }, 'input_audio'],
  ] as Array<[Record<string, unknown>, string]>) {
    const error = (() => {
      try {
        converseRequestOf({ ...base, ...extra })
      } catch (err) {
        return err
      }
      return undefined
    })()
    t.ok(error instanceof GatewayError && error.errorName === 'untranslatable_feature', `refused: ${name}`)
    t.match((error as Error).message, name)
  }
  const nameOf = (body: Record<string, unknown>): string | undefined => {
    try {
      converseRequestOf(body)
    } catch (err) {
      return err instanceof GatewayError ? err.errorName : 'not a GatewayError'
    }
    return undefined
  }
  t.equal(nameOf({ ...base, tool_choice: 'auto' }), 'invalid_body', 'tool_choice without tools')
  t.equal(nameOf({ ...base, max_tokens: 0 }), 'invalid_body')
})

t.test("errors: Bedrock's exception names as the corridor's statuses", async (t) => {
  const cases: Array<[number, string, number, string | null]> = [
    [400, 'ValidationException', 400, 'validation_exception'],
    [403, 'AccessDeniedException', 403, 'upstream_auth_failed'],
    [403, 'UnrecognizedClientException', 403, 'upstream_auth_failed'],
    [403, 'ExpiredTokenException', 403, 'upstream_auth_failed'],
    [404, 'ResourceNotFoundException', 404, 'model_not_found'],
    [429, 'ThrottlingException', 429, 'rate_limit_exceeded'],
    [400, 'ServiceQuotaExceededException', 429, 'rate_limit_exceeded'],
    [503, 'ServiceUnavailableException', 503, 'service_unavailable'],
    [429, 'ModelNotReadyException', 503, 'service_unavailable'],
    [408, 'ModelTimeoutException', 504, 'model_timeout'],
    [424, 'ModelErrorException', 502, 'model_error'],
    [500, 'InternalServerException', 500, 'internal_server_error'],
    [418, 'SomethingNewException', 418, null],
  ]
  for (const [status, name, to, code] of cases) {
    const error = bedrockErrorOf(
      status,
      `${name}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
      '{"message":"m"}',
    )
    t.equal(error.status, to, `${name} → ${to}`)
    t.equal(error.body.error.code, code)
    t.equal(error.body.error.message, 'm')
  }
  const byType = bedrockErrorOf(429, undefined, '{"__type":"com.amazon.bedrock#ThrottlingException","Message":"slow"}')
  t.same(
    [byType.status, byType.body.error.message],
    [429, 'slow'],
    'the body __type and Message when the header is absent',
  )
  t.equal(bedrockErrorOf(502, undefined, '<html>').body.error.message, 'The upstream (Amazon Bedrock) answered 502.')
})

t.test('reply: stop reasons, and a Converse reply as a chat completion', async (t) => {
  t.equal(finishReasonOf('end_turn'), 'stop')
  t.equal(finishReasonOf('stop_sequence'), 'stop')
  t.equal(finishReasonOf('max_tokens'), 'length')
  t.equal(finishReasonOf('tool_use'), 'tool_calls')
  t.equal(finishReasonOf('guardrail_intervened'), 'content_filter')
  t.equal(finishReasonOf('content_filtered'), 'content_filter')
  const reply = chatCompletionOf(
    {
      output: {
        message: {
          role: 'assistant',
          content: [
            { reasoningContent: { reasoningText: { text: 'Hmm.', signature: 's' } } },
            { text: 'Hi' },
            { toolUse: { toolUseId: 't1', name: 'f', input: { a: 1 } } },
          ],
        },
      },
      stopReason: 'tool_use',
      usage: { inputTokens: 3, outputTokens: 4, totalTokens: 17, cacheReadInputTokens: 6, cacheWriteInputTokens: 4 },
    },
    'm',
    1,
  )
  t.match(reply, {
    model: 'm',
    choices: [
      {
        message: {
          content: 'Hi',
          reasoning_content: 'Hmm.',
          thinking_blocks: [{ type: 'thinking', thinking: 'Hmm.', signature: 's' }],
          tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }],
        },
        finish_reason: 'tool_calls',
      },
    ],
    usage: {
      prompt_tokens: 13,
      completion_tokens: 4,
      total_tokens: 17,
      prompt_tokens_details: { cached_tokens: 6, cache_write_tokens: 4 },
    },
  })
})

async function translate(bytes: Buffer, step: number): Promise<string> {
  let out = ''
  const pieces: Buffer[] = []
  for (let i = 0; i < bytes.length; i += step) pieces.push(bytes.subarray(i, i + step))
  await pipeline(
    Readable.from(pieces),
    new ChatStreamTransform('m', 1, new EventStreamReader()),
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        out += chunk.toString()
        done()
      },
    }),
  )
  return out
}

t.test('stream: messages split at every byte translate the same; usage last; [DONE]', async (t) => {
  const bytes = Buffer.concat([
    event('messageStart', { role: 'assistant' }),
    event('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { redactedContent: 'cg==' } } }),
    event('contentBlockDelta', { contentBlockIndex: 1, delta: { text: 'Hé ' } }),
    event('contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 't1', name: 'f' } } }),
    event('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '{"a":' } } }),
    event('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '1}' } } }),
    event('messageStop', { stopReason: 'tool_use' }),
    event('metadata', { usage: { inputTokens: 1, outputTokens: 2, cacheReadInputTokens: 3 } }),
  ])
  const whole = await translate(bytes, bytes.length)
  const sameIds = (text: string): string => text.replaceAll(/chatcmpl-\w+/g, 'chatcmpl-x')
  t.equal(sameIds(await translate(bytes, 1)), sameIds(whole), 'one byte at a time')
  const chunks = whole
    .split('\n\n')
    .filter((f) => f.startsWith('data: ') && f !== 'data: [DONE]')
    .map(
      (f) =>
        JSON.parse(f.slice(6)) as {
          choices: Array<{ delta: Record<string, unknown>; finish_reason: unknown }>
          usage?: unknown
        },
    )
  t.same(chunks[0]?.choices[0]?.delta, { role: 'assistant', content: '' })
  t.same(chunks[1]?.choices[0]?.delta, { thinking_blocks: [{ type: 'redacted_thinking', data: 'cg==' }] })
  t.same(chunks[2]?.choices[0]?.delta, { content: 'Hé ' })
  t.match(chunks[3]?.choices[0]?.delta, {
    tool_calls: [{ index: 0, id: 't1', function: { name: 'f', arguments: '' } }],
  })
  t.same(chunks[5]?.choices[0]?.delta, { tool_calls: [{ index: 0, function: { arguments: '1}' } }] })
  t.equal(chunks[6]?.choices[0]?.finish_reason, 'tool_calls')
  t.match(chunks[7], { choices: [], usage: { prompt_tokens: 4, completion_tokens: 2 } })
  t.ok(whole.endsWith('data: [DONE]\n\n'))
})

t.test('stream: a corrupt message or one cut short fails the stream', async (t) => {
  const good = Buffer.from(event('messageStart', { role: 'assistant' }))
  const corrupt = Buffer.from(good)
  corrupt.writeUInt8(corrupt.readUInt8(corrupt.length - 6) ^ 0xff, corrupt.length - 6)
  await t.rejects(translate(corrupt, 7), 'a checksum that does not match')
  await t.rejects(translate(good.subarray(0, good.length - 3), 5), 'a body that ends inside a message')
})
