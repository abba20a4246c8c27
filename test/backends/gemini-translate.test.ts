// The Gemini translations on their own: what the e2e test (test/e2e/sdk-gemini.test.ts)
// cannot easily make the fake send (filters, blocked prompts, events cut anywhere) and
// the refusals of what Gemini's request cannot say.
import t from 'tap'
import { Readable } from 'node:stream'
import { GatewayError } from '../../src/errors.ts'
import { geminiErrorOf } from '../../src/backends/gemini/errors-in.ts'
import { chatCompletionOf } from '../../src/backends/gemini/reply-in.ts'
import { geminiRequestOf } from '../../src/backends/gemini/request-out.ts'
import { geminiSchemaOf } from '../../src/backends/gemini/schema-out.ts'
import { GeminiStreamIn } from '../../src/backends/gemini/stream-in.ts'

const refusal = (fn: () => unknown): GatewayError | undefined => {
  try {
    fn()
  } catch (err) {
    if (err instanceof GatewayError) return err
    throw err
  }
  return undefined
}

t.test('request: roles, merged turns, sampling members', async (t) => {
  const out = geminiRequestOf(
    {
      model: 'gemini-2.5-flash',
      messages: [
        { role: 'developer', content: 'Rule one.' },
        { role: 'system', content: [{ type: 'text', text: 'Rule two.' }] },
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
        { role: 'assistant', content: 'c' },
      ],
      n: 2,
      seed: 7,
      presence_penalty: 0.5,
      max_completion_tokens: 9,
      stop: 'X',
      tool_choice: { type: 'function', function: { name: 'f' } },
      user: 'end-user-1',
    },
    'gemini-2.5-flash',
  )
  t.same(out, {
    contents: [
      { role: 'user', parts: [{ text: 'a' }, { text: 'b' }] },
      { role: 'model', parts: [{ text: 'c' }] },
    ],
    systemInstruction: { parts: [{ text: 'Rule one.' }, { text: 'Rule two.' }] },
    toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] } },
    generationConfig: { presencePenalty: 0.5, seed: 7, candidateCount: 2, maxOutputTokens: 9, stopSequences: ['X'] },
  })
})

t.test('request: what cannot be said is refused, naming it', async (t) => {
  const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] }
  for (const [body, named] of [
    [{ ...base, logprobs: true }, 'logprobs'],
    [{ ...base, store: true }, 'store'],
    [{ ...base, messages: [{ role: 'user', content: 'hi', name: 'ann' }] }, 'messages[0].name'],
    [{ ...base, response_format: { type: 'grammar' } }, 'response_format.type'],
    [{ ...base, tools: [{ type: 'custom', custom: { name: 'x' } }] }, 'tools[0].type'],
    [
      { ...base, messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: 'f' } }] }] },
      'messages[0].content[0].type',
    ],
  ] as const) {
    const error = refusal(() => geminiRequestOf(body, 'gemini-2.5-flash'))
    t.equal(error?.errorName, 'untranslatable_feature', named)
    t.equal(error?.status, 400)
    t.match(error?.message, named)
  }
  const orphan = refusal(() =>
    geminiRequestOf(
      { ...base, messages: [{ role: 'tool', tool_call_id: 'call_1', content: 'x' }] },
      'gemini-2.5-flash',
    ),
  )
  t.equal(orphan?.errorName, 'invalid_body', 'a tool result for no call is the caller’s mistake')
})

t.test('request: reasoning_effort as a thinking budget (2.5) or level (3), thoughts included', async (t) => {
  const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }] }
  const thinking = (effort: string, model: string): unknown =>
    (geminiRequestOf({ ...base, reasoning_effort: effort }, model).generationConfig as Record<string, unknown>)
      .thinkingConfig
  t.same(thinking('low', 'gemini-2.5-flash'), { thinkingBudget: 1024, includeThoughts: true })
  t.same(thinking('medium', 'models/gemini-2.5-pro'), { thinkingBudget: 8192, includeThoughts: true })
  t.same(thinking('high', 'gemini-2.5-flash-lite'), { thinkingBudget: 24576, includeThoughts: true })
  t.same(thinking('none', 'gemini-2.5-flash'), { thinkingBudget: 0, includeThoughts: false }, 'none: no thinking')
  t.same(thinking('low', 'gemini-3-pro-preview'), { thinkingLevel: 'LOW', includeThoughts: true })
  t.same(thinking('minimal', 'models/gemini-3-flash-preview'), { thinkingLevel: 'MINIMAL', includeThoughts: true })
  t.same(thinking('high', 'gemini-4-neon'), { thinkingLevel: 'HIGH', includeThoughts: true }, 'later generations too')
  t.same(
    thinking('none', 'gemini-3-flash-preview'),
    { thinkingLevel: 'MINIMAL', includeThoughts: false },
    'Gemini 3 cannot stop thinking: MINIMAL is the nearest',
  )
  t.same(
    geminiRequestOf({ ...base, reasoning_effort: 'high', max_tokens: 2000 }, 'gemini-2.5-flash').generationConfig,
    { maxOutputTokens: 2000, thinkingConfig: { thinkingBudget: 1999, includeThoughts: true } },
    'thoughts count within maxOutputTokens: the budget stays below it',
  )
  t.equal(geminiRequestOf(base, 'gemini-2.5-flash').generationConfig, undefined, 'not asked: nothing sent')
  const wrong = refusal(() => geminiRequestOf({ ...base, reasoning_effort: 'max' }, 'gemini-2.5-flash'))
  t.equal(wrong?.errorName, 'invalid_body')
  t.match(wrong?.message, /reasoning_effort/)
})

t.test('schema: references inlined, what Gemini has no keyword for refused', async (t) => {
  t.same(
    geminiSchemaOf(
      {
        $defs: { city: { type: 'string', enum: ['Paris', 'Rome'] } },
        type: 'object',
        properties: { to: { $ref: '#/$defs/city' }, tags: { type: 'array', items: { const: 'x' } } },
      },
      'p',
    ),
    {
      type: 'OBJECT',
      properties: { to: { type: 'STRING', enum: ['Paris', 'Rome'] }, tags: { type: 'ARRAY', items: { enum: ['x'] } } },
    },
  )
  for (const [schema, named] of [
    [{ type: 'object', properties: { a: { oneOf: [] } } }, 'p.properties.a.oneOf'],
    [{ type: 'object', additionalProperties: { type: 'string' } }, 'p.additionalProperties'],
    [{ type: ['string', 'number'] }, 'p.type'],
    [{ $defs: { n: { type: 'object', properties: { next: { $ref: '#/$defs/n' } } } }, $ref: '#/$defs/n' }, 'recursive'],
  ] as const) {
    const error = refusal(() => geminiSchemaOf(schema, 'p'))
    t.equal(error?.errorName, 'untranslatable_feature')
    t.match(error?.message, named)
  }
})

t.test('reply: finish reasons and usage', async (t) => {
  const reply = (finishReason: string, extra: Record<string, unknown> = {}): Record<string, unknown> =>
    chatCompletionOf(
      { candidates: [{ content: { parts: [{ text: 'x' }] }, finishReason }], ...extra },
      'gemini-2.5-flash',
      1,
    )
  const finish = (r: Record<string, unknown>): unknown =>
    (r.choices as Array<{ finish_reason: unknown }>)[0]?.finish_reason
  t.equal(finish(reply('STOP')), 'stop')
  t.equal(finish(reply('MAX_TOKENS')), 'length')
  t.equal(finish(reply('SAFETY')), 'content_filter')
  t.equal(finish(reply('RECITATION')), 'content_filter')
  const blocked = chatCompletionOf(
    { promptFeedback: { blockReason: 'SAFETY' }, usageMetadata: { promptTokenCount: 4 } },
    'm',
    1,
  )
  t.match(blocked, {
    choices: [{ finish_reason: 'content_filter', message: { content: '' } }],
    usage: { prompt_tokens: 4, completion_tokens: 0 },
  })
  t.match(
    reply('STOP', {
      usageMetadata: {
        promptTokenCount: 10,
        toolUsePromptTokenCount: 3,
        candidatesTokenCount: 4,
        thoughtsTokenCount: 6,
        cachedContentTokenCount: 2,
      },
    }),
    {
      usage: {
        prompt_tokens: 13,
        completion_tokens: 10,
        total_tokens: 23,
        prompt_tokens_details: { cached_tokens: 2 },
      },
    },
  )
})

t.test('stream: events cut anywhere, usage last, then [DONE]', async (t) => {
  const events = [
    {
      candidates: [{ content: { parts: [{ text: 'héllo ' }] } }],
      usageMetadata: { promptTokenCount: 5 },
      responseId: 'r1',
    },
    {
      candidates: [{ content: { parts: [{ text: 'wörld' }] }, finishReason: 'MAX_TOKENS' }],
      usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, thoughtsTokenCount: 1 },
    },
  ]
  const wire = Buffer.from(events.map((e) => `data: ${JSON.stringify(e)}\r\n\r\n`).join(''))
  // One byte at a time: every boundary, a multi-byte character's included.
  const pieces = [...wire].map((b) => Buffer.from([b]))
  let out = ''
  for await (const chunk of Readable.from(pieces).pipe(new GeminiStreamIn('m', 1))) out += String(chunk)
  const datas = out
    .split('\n\n')
    .filter(Boolean)
    .map((e) => e.slice('data: '.length))
  t.equal(datas.at(-1), '[DONE]')
  const chunks = datas.slice(0, -1).map((d) => JSON.parse(d) as Record<string, unknown>)
  t.equal(chunks.length, 3)
  t.match(chunks[0], {
    id: 'chatcmpl-r1',
    choices: [{ delta: { role: 'assistant', content: 'héllo ' }, finish_reason: null }],
  })
  t.match(chunks[1], { id: 'chatcmpl-r1', choices: [{ delta: { content: 'wörld' }, finish_reason: 'length' }] })
  t.match(chunks[2], { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } })
})

t.test('thoughts: reasoning_content, whole and as deltas; thoughtsTokenCount as reasoning_tokens', async (t) => {
  const usageMetadata = { promptTokenCount: 5, candidatesTokenCount: 2, thoughtsTokenCount: 4 }
  const whole = chatCompletionOf(
    {
      candidates: [
        {
          content: {
            role: 'model',
            parts: [{ text: 'Hmm, ', thought: true }, { text: 'so.', thought: true }, { text: 'Hi' }],
          },
          finishReason: 'STOP',
        },
      ],
      usageMetadata,
    },
    'm',
    1,
  )
  t.match(whole, {
    choices: [{ message: { content: 'Hi', reasoning_content: 'Hmm, so.' } }],
    usage: {
      prompt_tokens: 5,
      completion_tokens: 6,
      total_tokens: 11,
      completion_tokens_details: { reasoning_tokens: 4 },
    },
  })
  const events = [
    { candidates: [{ content: { parts: [{ text: 'Hmm.', thought: true }] } }], responseId: 'r2' },
    { candidates: [{ content: { parts: [{ text: 'Hi' }] }, finishReason: 'STOP' }], usageMetadata },
  ]
  let out = ''
  const wire = Readable.from(events.map((e) => Buffer.from(`data: ${JSON.stringify(e)}\r\n\r\n`)))
  for await (const chunk of wire.pipe(new GeminiStreamIn('m', 1))) out += String(chunk)
  const chunks = out
    .split('\n\n')
    .filter((e) => e !== '' && e !== 'data: [DONE]')
    .map((e) => JSON.parse(e.slice('data: '.length)) as Record<string, unknown>)
  t.match(chunks[0], { choices: [{ delta: { reasoning_content: 'Hmm.' } }] })
  t.notOk(Object.hasOwn((chunks[0] as { choices: [{ delta: object }] }).choices[0].delta, 'content'), 'no content yet')
  t.match(chunks[1], { choices: [{ delta: { content: 'Hi' }, finish_reason: 'stop' }] })
  t.match(chunks.at(-1), {
    usage: { prompt_tokens: 5, completion_tokens: 6, completion_tokens_details: { reasoning_tokens: 4 } },
  })
})

t.test("errors: Google's shape, RetryInfo's wait, the wrapped list of the OpenAI-compatible endpoint", async (t) => {
  const retry = (delay: string): string | undefined =>
    geminiErrorOf(
      429,
      JSON.stringify({
        error: {
          code: 429,
          status: 'RESOURCE_EXHAUSTED',
          message: 'm',
          details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: delay }],
        },
      }),
    ).headers['retry-after-ms']
  t.equal(retry('37s'), '37000')
  t.equal(retry('1.5s'), '1500')
  t.equal(retry('soon'), undefined, 'a wait that is not a duration is not believed')
  t.match(geminiErrorOf(404, '[{"error":{"code":404,"status":"NOT_FOUND","message":"models/x is not found"}}]'), {
    status: 404,
    body: { error: { code: 'model_not_found', message: 'models/x is not found' } },
  })
  t.match(geminiErrorOf(502, '<html>bad gateway</html>'), { status: 502, body: { error: { type: 'server_error' } } })
})
