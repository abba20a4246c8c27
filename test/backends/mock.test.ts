// The mock backend's text endpoints, called through adapter.send as the relay calls it:
// chat completions, legacy completions and the Responses API, plain and streamed.
import t from 'tap'
import type OpenAI from 'openai'
import { text as readText } from 'node:stream/consumers'
import { countChatTokens, countInputTokens, countTextTokens } from '../../src/tokenizer/tokens.ts'
import { dataEvents, json, MOCK_CONFIG, mockBackend, post, type OpenAIErrorBody } from './mock-helpers.ts'

const backend = mockBackend(t)

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Tell me about toll gates.' },
]

t.test('supports every endpoint that reaches a backend, and not the ones the gateway answers', async (t) => {
  for (const endpoint of [
    'chat.completions',
    'completions',
    'responses',
    'embeddings',
    'images.generations',
    'images.edits',
    'audio.transcriptions',
    'audio.translations',
    'files.create',
    'files.list',
    'files.delete',
    'fine_tuning.jobs.create',
    'fine_tuning.jobs.list',
    'fine_tuning.jobs.cancel',
    'fine_tuning.jobs.events',
  ] as const) {
    t.ok(backend.supports(endpoint), endpoint)
  }
  for (const endpoint of ['models.list', 'models.get', 'audio.models'] as const)
    t.notOk(backend.supports(endpoint), endpoint)
  t.equal(backend.type, 'mock')
  t.equal(backend.name, 'mock')
})

t.test('chat completion: shape, determinism, and usage from the tokenizer', async (t) => {
  const res = await backend.send(post('chat.completions', '/chat/completions', { model: 'gpt-test', messages }))
  t.equal(res.headers['content-type'], 'application/json')
  const body = await json<OpenAI.ChatCompletion>(res)
  t.match(body.id, /^chatcmpl-[A-Za-z0-9]+$/)
  t.equal(body.object, 'chat.completion')
  t.equal(body.model, 'gpt-test', 'echoes the request model')
  t.ok(Number.isInteger(body.created) && Math.abs(body.created - Date.now() / 1000) < 600, 'created is in Unix seconds')
  t.equal(body.choices.length, 1)
  const choice = body.choices[0]!
  t.equal(choice.index, 0)
  t.equal(choice.message.role, 'assistant')
  t.match(choice.message.content, /^This is Tollgate's mock backend replying to prompt #[0-9a-f]{6}\./)
  t.equal(choice.finish_reason, 'stop', 'the default length ends by itself')
  const content = choice.message.content ?? ''
  // It ends on the last whole sentence within the default length: the reply cut at that
  // length (max_tokens) starts with it, and has no full stop after it.
  const cut = await json<OpenAI.ChatCompletion>(
    await backend.send(
      post('chat.completions', '/chat/completions', {
        model: 'gpt-test',
        messages,
        max_tokens: MOCK_CONFIG.defaultCompletionTokens,
      }),
    ),
  )
  const cutContent = cut.choices[0]?.message.content ?? ''
  t.equal(cut.choices[0]?.finish_reason, 'length')
  t.match(content, /\.$/, 'the default length ends on a sentence')
  t.ok(cutContent.startsWith(content), 'the last whole sentence of the reply cut at the default length')
  t.notMatch(cutContent.slice(content.length), /\./)
  t.ok((await countTextTokens(content)) <= MOCK_CONFIG.defaultCompletionTokens, 'within the default length, in tokens')
  t.same(
    body.usage && {
      prompt: body.usage.prompt_tokens,
      completion: body.usage.completion_tokens,
      total: body.usage.total_tokens,
    },
    {
      prompt: await countChatTokens(messages),
      completion: await countTextTokens(content),
      total: (await countChatTokens(messages)) + (await countTextTokens(content)),
    },
  )

  const again = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', { model: 'gpt-test', messages })),
  )
  t.equal(again.choices[0]?.message.content, content, 'same prompt, same answer')
  t.not(again.id, body.id, 'but a new id')

  const other = await json<OpenAI.ChatCompletion>(
    await backend.send(
      post('chat.completions', '/chat/completions', {
        model: 'gpt-test',
        messages: [{ role: 'user', content: 'Something else entirely.' }],
      }),
    ),
  )
  t.not(other.choices[0]?.message.content, content, 'another prompt, another answer')
})

t.test(
  'chat completion: max_completion_tokens, then max_tokens, cut the reply with finish_reason "length"',
  async (t) => {
    for (const [limits, expected] of [
      [{ max_tokens: 7 }, 7],
      [{ max_completion_tokens: 50 }, 50],
      [{ max_completion_tokens: 3, max_tokens: 40 }, 3],
      [{ max_tokens: 1 }, 1],
      [{ max_tokens: 300 }, 300],
    ] as const) {
      const body = await json<OpenAI.ChatCompletion>(
        await backend.send(post('chat.completions', '/chat/completions', { model: 'm', messages, ...limits })),
      )
      const content = body.choices[0]?.message.content ?? ''
      t.equal(await countTextTokens(content), expected, `${JSON.stringify(limits)}: ${expected} tokens`)
      t.equal(body.usage?.completion_tokens, expected)
      t.equal(body.choices[0]?.finish_reason, 'length')
    }
  },
)

t.test('chat completion: exact token budgets hold for many prompts and lengths', async (t) => {
  let checked = 0
  for (let budget = 1; budget <= 60; budget++) {
    for (const prompt of ['a', 'Hello there', `prompt ${budget}`]) {
      const body = await json<OpenAI.ChatCompletion>(
        await backend.send(
          post('chat.completions', '/chat/completions', {
            model: 'm',
            messages: [{ role: 'user', content: prompt }],
            max_tokens: budget,
          }),
        ),
      )
      if ((await countTextTokens(body.choices[0]?.message.content ?? '')) === budget) checked++
    }
  }
  t.equal(checked, 180, 'every reply is exactly as long as asked')
})

t.test('chat completion: n choices differ, and usage sums them', async (t) => {
  const body = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', { model: 'm', messages, n: 3, max_tokens: 30 })),
  )
  t.same(
    body.choices.map((c) => c.index),
    [0, 1, 2],
  )
  const texts = body.choices.map((c) => c.message.content ?? '')
  t.equal(new Set(texts).size, 3, 'three different replies')
  t.equal(
    body.usage?.completion_tokens,
    (await Promise.all(texts.map((text) => countTextTokens(text)))).reduce((sum, n) => sum + n, 0),
  )
  const single = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', { model: 'm', messages, max_tokens: 30 })),
  )
  t.equal(single.choices[0]?.message.content, texts[0], 'choice 0 is the lone reply')
})

t.test('chat stream: role first, finish last, deltas add up to the JSON reply, no usage unless asked', async (t) => {
  const request = { model: 'm', messages, max_tokens: 20 }
  const whole = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', request)),
  )
  const res = await backend.send(post('chat.completions', '/chat/completions', { ...request, stream: true }))
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/)
  const events = await dataEvents(res)
  t.equal(events.at(-1), '[DONE]', 'ends with [DONE]')
  const chunks = events.slice(0, -1) as OpenAI.ChatCompletionChunk[]
  t.ok(
    chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]?.id && c.model === 'm'),
    'one id, one model',
  )
  t.ok(
    chunks.every((c) => !('usage' in c)),
    'no usage field at all',
  )
  t.equal(chunks[0]?.choices[0]?.delta.role, 'assistant', 'the first delta has the role')
  t.equal(chunks.at(-1)?.choices[0]?.finish_reason, 'length', 'the last has the finish reason')
  t.ok(
    chunks.slice(0, -1).every((c) => c.choices[0]?.finish_reason === null),
    'no finish reason before',
  )
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')
  t.equal(text, whole.choices[0]?.message.content, 'the deltas add up to the non-streamed reply')
  t.ok(chunks.length >= 10, 'one piece per event, not one blob')
})

t.test('chat stream with include_usage: usage null on each chunk, then a usage chunk with no choices', async (t) => {
  const res = await backend.send(
    post('chat.completions', '/chat/completions', {
      model: 'm',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    }),
  )
  const events = await dataEvents(res)
  t.equal(events.at(-1), '[DONE]')
  const chunks = events.slice(0, -1) as OpenAI.ChatCompletionChunk[]
  const last = chunks.at(-1)!
  t.same(last.choices, [], 'the usage chunk has no choices')
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')
  t.same(last.usage && [last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.total_tokens], [
    await countChatTokens(messages),
    await countTextTokens(text),
    (await countChatTokens(messages)) + (await countTextTokens(text)),
  ])
  t.ok(
    chunks.slice(0, -1).every((c) => c.usage === null),
    'every other chunk says usage: null',
  )
  t.equal(chunks.at(-2)?.choices[0]?.finish_reason, 'stop', 'the default length ends by itself')
})

t.test('chat stream with n > 1 keeps each choice whole', async (t) => {
  const request = { model: 'm', messages, n: 2, max_tokens: 15 }
  const whole = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', request)),
  )
  const events = await dataEvents(
    await backend.send(post('chat.completions', '/chat/completions', { ...request, stream: true })),
  )
  const chunks = events.slice(0, -1) as OpenAI.ChatCompletionChunk[]
  for (const index of [0, 1]) {
    const mine = chunks.flatMap((c) => c.choices.filter((choice) => choice.index === index))
    t.equal(mine.map((c) => c.delta.content ?? '').join(''), whole.choices[index]?.message.content, `choice ${index}`)
    t.equal(mine.at(-1)?.finish_reason, 'length')
  }
})

t.test('chat refusals are 400s in OpenAI shape', async (t) => {
  const cases: Array<[Record<string, unknown>, string, string]> = [
    [{ model: 'm' }, 'messages', 'missing_required_parameter'],
    [{ model: 'm', messages: [] }, 'messages', 'empty_array'],
    [{ model: 'm', messages: 'hi' }, 'messages', 'invalid_type'],
    [{ model: 'm', messages, max_tokens: 0 }, 'max_tokens', 'integer_below_min_value'],
    [{ model: 'm', messages, max_completion_tokens: 10_000_000 }, 'max_completion_tokens', 'integer_above_max_value'],
    [{ model: 'm', messages, n: 'two' }, 'n', 'invalid_type'],
    [{ model: 'm', messages, stream: 'yes' }, 'stream', 'invalid_type'],
    [{ model: 'm', messages, stream_options: { include_usage: true } }, 'stream_options', 'invalid_value'],
    [{ model: 'm', messages, n: 128, max_tokens: 65_536 }, 'n', 'invalid_value'],
  ]
  for (const [value, param, code] of cases) {
    const res = await backend.send(post('chat.completions', '/chat/completions', value))
    t.equal(res.headers['content-type'], 'application/json')
    const body = await json<OpenAIErrorBody>(res, 400)
    t.equal(body.error.type, 'invalid_request_error')
    t.equal(body.error.param, param, `${code}: param`)
    t.equal(body.error.code, code)
    t.type(body.error.message, 'string')
  }
  const multipart = await backend.send({ ...post('chat.completions', '/chat/completions', {}), body: { kind: 'none' } })
  t.equal(multipart.status, 400, 'a chat request without a JSON body')
})

t.test('legacy completions: text_completion, prompt arrays, streaming', async (t) => {
  const body = await json<OpenAI.Completion>(
    await backend.send(post('completions', '/completions', { model: 'm', prompt: 'Once upon a time', max_tokens: 9 })),
  )
  t.equal(body.object, 'text_completion')
  t.match(body.id, /^cmpl-/)
  t.equal(await countTextTokens(body.choices[0]?.text ?? ''), 9)
  t.equal(body.choices[0]?.finish_reason, 'length')
  t.equal(body.usage?.prompt_tokens, await countInputTokens('Once upon a time'))

  const many = await json<OpenAI.Completion>(
    await backend.send(
      post('completions', '/completions', { model: 'm', prompt: ['first prompt here', 'second one'], n: 2 }),
    ),
  )
  t.equal(many.choices.length, 4, 'n choices for each prompt')
  t.same(
    many.choices.map((c) => c.index),
    [0, 1, 2, 3],
  )
  t.equal(many.choices[0]?.finish_reason, 'stop')
  t.equal(many.usage?.prompt_tokens, await countInputTokens(['first prompt here', 'second one']))
  t.equal(
    many.usage?.completion_tokens,
    (await Promise.all(many.choices.map((c) => countTextTokens(c.text)))).reduce((a, b) => a + b, 0),
  )
  t.ok(
    many.choices.every((c) => c.text.endsWith('.')),
    'each ends on a sentence',
  )
  t.not(many.choices[0]?.text, many.choices[2]?.text, 'different prompts, different text')

  const tokens = await json<OpenAI.Completion>(
    await backend.send(post('completions', '/completions', { model: 'm', prompt: [1, 2, 3, 4] })),
  )
  t.equal(tokens.choices.length, 1, 'token ids are one prompt')
  t.equal(tokens.usage?.prompt_tokens, 4)

  const events = await dataEvents(
    await backend.send(
      post('completions', '/completions', {
        model: 'm',
        prompt: 'Once upon a time',
        max_tokens: 9,
        stream: true,
        stream_options: { include_usage: true },
      }),
    ),
  )
  t.equal(events.at(-1), '[DONE]')
  const chunks = events.slice(0, -1) as OpenAI.Completion[]
  t.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), body.choices[0]?.text, 'the stream adds up')
  t.equal(chunks.at(-1)?.usage?.completion_tokens, 9)
  t.same(chunks.at(-1)?.choices, [])
  t.equal(chunks.at(-2)?.choices[0]?.finish_reason, 'length')

  const missing = await json<OpenAIErrorBody>(
    await backend.send(post('completions', '/completions', { model: 'm' })),
    400,
  )
  t.equal(missing.error.param, 'prompt')
  const wrong = await json<OpenAIErrorBody>(
    await backend.send(post('completions', '/completions', { model: 'm', prompt: [{}] })),
    400,
  )
  t.equal(wrong.error.param, 'prompt')
  const huge = await json<OpenAIErrorBody>(
    await backend.send(
      post('completions', '/completions', {
        model: 'm',
        prompt: Array.from({ length: 100 }, (_, i) => `prompt ${i}`),
        n: 50,
        max_tokens: 100,
      }),
    ),
    400,
  )
  t.match(huge.error.message, /at most 262144 tokens per request/, 'prompts times n times max_tokens is bounded')
})

t.test('responses: a completed response with one assistant message', async (t) => {
  const res = await json<OpenAI.Responses.Response>(
    await backend.send(post('responses', '/responses', { model: 'gpt-r', input: 'Write one line.' })),
  )
  t.match(res.id, /^resp_/)
  t.equal(res.object, 'response')
  t.equal(res.status, 'completed')
  t.equal(res.model, 'gpt-r')
  t.notOk('output_text' in res, 'output_text is left to the SDK')
  t.equal(res.output.length, 1)
  const message = res.output[0] as OpenAI.Responses.ResponseOutputMessage
  t.equal(message.type, 'message')
  t.equal(message.role, 'assistant')
  const part = message.content[0] as OpenAI.Responses.ResponseOutputText
  t.equal(part.type, 'output_text')
  t.same(part.annotations, [])
  const input = [{ role: 'user', content: 'Write one line.' }]
  t.same(res.usage && [res.usage.input_tokens, res.usage.output_tokens, res.usage.total_tokens], [
    await countChatTokens(input),
    await countTextTokens(part.text),
    (await countChatTokens(input)) + (await countTextTokens(part.text)),
  ])
  t.equal(res.usage?.output_tokens, MOCK_CONFIG.defaultCompletionTokens)
  t.equal(res.usage?.input_tokens_details.cached_tokens, 0)
  t.equal(res.usage?.output_tokens_details.reasoning_tokens, 0)

  const chat = await json<OpenAI.ChatCompletion>(
    await backend.send(post('chat.completions', '/chat/completions', { model: 'm', messages: input })),
  )
  t.equal(part.text, chat.choices[0]?.message.content, 'the same conversation gets the same reply on either API')
})

t.test('responses: message arrays, instructions and max_output_tokens', async (t) => {
  const input = [
    { role: 'user', content: [{ type: 'input_text', text: 'Hello' }] },
    { role: 'assistant', content: [{ type: 'output_text', text: 'Hi.' }] },
    { role: 'user', content: 'And now?' },
  ]
  const res = await json<OpenAI.Responses.Response>(
    await backend.send(
      post('responses', '/responses', {
        model: 'm',
        input,
        instructions: 'Be brief.',
        max_output_tokens: 12,
      }),
    ),
  )
  const counted = [
    { role: 'developer', content: 'Be brief.' },
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi.' },
    { role: 'user', content: 'And now?' },
  ]
  t.equal(res.usage?.input_tokens, await countChatTokens(counted))
  t.equal(res.usage?.output_tokens, 12)
  t.equal(res.instructions, 'Be brief.')
  t.equal(res.max_output_tokens, 12)

  for (const [value, code] of [
    [{ model: 'm' }, 'missing_required_parameter'],
    [{ model: 'm', input: 42 }, 'invalid_type'],
    [{ model: 'm', input: ['x'] }, 'invalid_type'],
  ] as const) {
    const error = await json<OpenAIErrorBody>(await backend.send(post('responses', '/responses', value)), 400)
    t.equal(error.error.code, code)
    t.match(error.error.param, /^input/)
  }
})

t.test('responses stream: the full event sequence, deltas adding up, usage on completed', async (t) => {
  const whole = await json<OpenAI.Responses.Response>(
    await backend.send(post('responses', '/responses', { model: 'm', input: 'Stream me.' })),
  )
  const res = await backend.send(post('responses', '/responses', { model: 'm', input: 'Stream me.', stream: true }))
  t.match(res.headers['content-type'], /^text\/event-stream/)
  const raw = await readText(res.body)
  t.notMatch(raw, /\[DONE\]/, 'the Responses API sends no [DONE]')
  const frames = raw.split('\n\n').filter((f) => f !== '')
  const events = frames.map((frame) => {
    const [eventLine, dataLine] = frame.split('\n')
    const data = JSON.parse(dataLine?.slice(6) ?? '') as OpenAI.Responses.ResponseStreamEvent
    t.equal(eventLine, `event: ${data.type}`)
    return data
  })
  const types = events.map((e) => e.type)
  const deltas = events.filter(
    (e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === 'response.output_text.delta',
  )
  t.same(
    types.filter((type) => type !== 'response.output_text.delta'),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.completed',
    ],
  )
  t.same(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
    'sequence numbers count up from 0',
  )
  const text = deltas.map((d) => d.delta).join('')
  const wholeText = (
    (whole.output[0] as OpenAI.Responses.ResponseOutputMessage).content[0] as OpenAI.Responses.ResponseOutputText
  ).text
  t.equal(text, wholeText, 'deltas add up to the non-streamed text')
  const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent
  t.equal(completed.response.status, 'completed')
  t.equal(completed.response.usage?.output_tokens, await countTextTokens(text))
  const created = events[0] as OpenAI.Responses.ResponseCreatedEvent
  t.equal(created.response.status, 'in_progress')
  t.equal(created.response.usage, null)
  t.equal(created.response.id, completed.response.id, 'one response id throughout')
})
