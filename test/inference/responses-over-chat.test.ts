// The Responses API over a chat-only deployment (src/inference/responses-over-chat/): the
// request each kind of deployment is sent, what is refused and named, the reply and the
// stream as the Responses API's (checked against the event and item shapes of OpenAI's
// published OpenAPI document), and the usage exactly as the upstream reported it.
import { readFileSync } from 'node:fs'
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import type { BackendAdapter, UpstreamResponse } from '../../src/backends/port.ts'
import type { Deployment } from '../../src/backends/registry.ts'
import type { Endpoint } from '../../src/config/schema.ts'
import { GatewayError } from '../../src/errors.ts'
import { carriedOf } from '../../src/inference/responses-over-chat/carrier.ts'
import { checkTranslatable, overChat, replyFor, requestFor } from '../../src/inference/responses-over-chat/index.ts'
import { responseOfChat } from '../../src/inference/responses-over-chat/reply.ts'
import { chatRequestOf } from '../../src/inference/responses-over-chat/request.ts'
import { ResponsesStream } from '../../src/inference/responses-over-chat/stream.ts'
import type { UpstreamCall } from '../../src/inference/upstream-request.ts'

const chatOnly = (type: BackendAdapter['type']): Deployment => ({
  adapter: {
    name: type,
    type,
    supports: (endpoint: Endpoint) => endpoint === 'chat.completions',
    send: () => Promise.reject(new Error('not sent')),
    close: () => Promise.resolve(),
  },
  upstreamModel: `${type}-upstream-model`,
  weight: 1,
  deploymentIndex: 0,
})
const native: Deployment = {
  ...chatOnly('openai'),
  adapter: { ...chatOnly('openai').adapter, supports: () => true },
}
const call = (body: Record<string, unknown>, stream = false): UpstreamCall => ({
  endpoint: 'responses',
  method: 'POST',
  path: '/responses',
  body: { kind: 'json', value: body },
  stream,
  requestId: 'req-1',
  signal: new AbortController().signal,
  client: {} as UpstreamCall['client'],
})

/** The refusal `run` throws: a 400 untranslatable_feature whose message names `named`. */
function refused(t: Test, run: () => unknown, named: RegExp, param?: string): void {
  try {
    run()
    t.fail(`should be refused naming ${String(named)}`)
  } catch (err) {
    t.ok(err instanceof GatewayError && err.errorName === 'untranslatable_feature', `refused: ${String(err)}`)
    t.equal((err as GatewayError).status, 400)
    t.match((err as GatewayError).message, named)
    if (param !== undefined) t.equal((err as GatewayError).toBody().error?.param, param)
  }
}

t.test('which deployments are served through the translation', async (t) => {
  t.ok(overChat('responses', chatOnly('anthropic').adapter))
  t.ok(overChat('responses', chatOnly('gemini').adapter))
  t.notOk(overChat('responses', native.adapter), 'a deployment that speaks the Responses API gets it as it came')
  t.notOk(overChat('chat.completions', chatOnly('anthropic').adapter))
  const sent = requestFor(call({ model: 'm', input: 'Hi', store: false }), native, 100)
  t.equal(sent.endpoint, 'responses')
  t.same(sent.body, {
    kind: 'json',
    value: { model: 'openai-upstream-model', input: 'Hi', store: false, max_output_tokens: 100 },
  })
})

t.test(
  'a chat-only deployment is sent the chat completion, with its model, the cap and the stream usage',
  async (t) => {
    const sent = requestFor(
      call({ model: 'claude', input: 'Hi', instructions: 'Be brief.', stream: true }, true),
      chatOnly('anthropic'),
      300,
    )
    t.equal(sent.endpoint, 'chat.completions')
    t.equal(sent.path, '/chat/completions')
    t.same(sent.body.kind === 'json' ? sent.body.value : null, {
      model: 'anthropic-upstream-model',
      stream: true,
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
      ],
      max_tokens: 300,
      stream_options: { include_usage: true },
    })
  },
)

t.test('input items: messages, images, a tool round trip, reasoning carried back', async (t) => {
  const thinking = [{ type: 'thinking', thinking: 'Hmm.', signature: 'sig-1' }]
  const carried = responseOfChat(
    {
      choices: [
        {
          message: {
            role: 'assistant',
            content: null,
            reasoning_content: 'Hmm.',
            thinking_blocks: thinking,
            tool_calls: [
              {
                id: 'call_1',
                type: 'function',
                function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
                extra_content: { google: { thought_signature: 'gsig' } },
              },
            ],
          },
          finish_reason: 'tool_calls',
        },
      ],
    },
    { model: 'm' },
  )
  const output = carried.output as Array<Record<string, unknown>>
  t.same(
    output.map((item) => item.type),
    ['reasoning', 'function_call'],
  )
  t.same(carriedOf(output[0]?.encrypted_content), { thinking, signatures: { call_1: 'gsig' } })
  const chat = chatRequestOf(
    {
      model: 'm',
      max_output_tokens: 50,
      temperature: 0.2,
      input: [
        { role: 'developer', content: 'Answer in French.' },
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'Weather here?' },
            { type: 'input_image', image_url: 'data:image/png;base64,AAAA', detail: 'low' },
          ],
        },
        ...output,
        { type: 'function_call_output', call_id: 'call_1', output: [{ type: 'input_text', text: '21 degrees' }] },
        { role: 'assistant', content: [{ type: 'output_text', text: 'It is 21.' }] },
        { role: 'user', content: 'Thanks' },
      ],
    },
    { type: 'anthropic' },
  )
  t.same(chat, {
    model: 'm',
    max_tokens: 50,
    temperature: 0.2,
    messages: [
      { role: 'developer', content: 'Answer in French.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Weather here?' },
          { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA', detail: 'low' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        thinking_blocks: thinking,
        tool_calls: [
          {
            id: 'call_1',
            type: 'function',
            function: { name: 'get_weather', arguments: '{"city":"Paris"}' },
            extra_content: { google: { thought_signature: 'gsig' } },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '21 degrees' },
      { role: 'assistant', content: 'It is 21.' },
      { role: 'user', content: 'Thanks' },
    ],
  })
})

t.test('tools, tool_choice, text.format, reasoning', async (t) => {
  const chat = chatRequestOf(
    {
      model: 'm',
      input: 'Hi',
      tools: [{ type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: true }],
      tool_choice: { type: 'function', name: 'f' },
      parallel_tool_calls: false,
      text: { format: { type: 'json_schema', name: 'out', schema: { type: 'object' }, strict: true } },
      reasoning: { effort: 'medium', summary: 'auto' },
      max_output_tokens: 3000,
      include: ['reasoning.encrypted_content'],
      store: false,
      metadata: { who: 'me' },
    },
    { type: 'anthropic' },
  )
  t.same(
    chat,
    {
      model: 'm',
      tools: [
        { type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true } },
      ],
      tool_choice: { type: 'function', function: { name: 'f' } },
      parallel_tool_calls: false,
      response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' }, strict: true } },
      max_tokens: 3000,
      messages: [{ role: 'user', content: 'Hi' }],
      thinking: { type: 'enabled', budget_tokens: 2999 },
    },
    'the thinking budget stays below the cap; metadata stays with the reply',
  )
  t.same(
    chatRequestOf(
      { model: 'm', input: 'Hi', reasoning: { effort: 'high' }, max_output_tokens: 20000 },
      { type: 'anthropic' },
    ).thinking,
    {
      type: 'enabled',
      budget_tokens: 16384,
    },
  )
  refused(
    t,
    () =>
      chatRequestOf(
        { model: 'm', input: 'Hi', reasoning: { effort: 'low' }, max_output_tokens: 500 },
        { type: 'anthropic' },
      ),
    /at least 1024/,
  )
  refused(
    t,
    () => chatRequestOf({ model: 'm', input: 'Hi', reasoning: { effort: 'low' } }, { type: 'bedrock' }),
    /reasoning\.effort.*bedrock/,
    'reasoning.effort',
  )
  // A gemini backend takes chat's reasoning_effort, which it asks Gemini for as a thinkingConfig.
  t.match(chatRequestOf({ model: 'm', input: 'Hi', reasoning: { effort: 'medium' } }, { type: 'gemini' }), {
    reasoning_effort: 'medium',
  })
  try {
    chatRequestOf({ model: 'm', input: 'Hi', reasoning: { effort: 'max' } }, { type: 'gemini' })
    t.fail('an unknown effort should be refused')
  } catch (err) {
    t.match(err, { errorName: 'invalid_body', param: 'reasoning.effort' }, 'an unknown effort is the caller’s mistake')
  }
  t.notOk(
    'thinking' in
      chatRequestOf({ model: 'm', input: 'Hi', reasoning: { effort: null, summary: 'auto' } }, { type: 'gemini' }),
  )
})

t.test('what needs OpenAI itself is refused with a 400 naming it, before anything is sent', async (t) => {
  const base = { model: 'm', input: 'Hi' }
  const cases: Array<[Record<string, unknown>, RegExp, string]> = [
    [{ tools: [{ type: 'web_search' }] }, /built-in tool 'web_search'/, 'tools[0]'],
    [
      {
        tools: [
          { type: 'function', name: 'f' },
          { type: 'file_search', vector_store_ids: ['vs_1'] },
        ],
      },
      /'file_search'/,
      'tools[1]',
    ],
    [{ previous_response_id: 'resp_1' }, /previous_response_id.*stored/, 'previous_response_id'],
    [{ conversation: 'conv_1' }, /conversation/, 'conversation'],
    [{ store: true }, /store/, 'store'],
    [{ input: [{ type: 'item_reference', id: 'msg_1' }] }, /item_reference/, 'input[0]'],
    [
      { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] },
      /'input_file'/,
      'input[0].content[0].type',
    ],
    [
      { input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }] },
      /file_id/,
      'input[0].content[0].file_id',
    ],
    [{ input: [{ type: 'web_search_call', id: 'ws_1' }] }, /'web_search_call'/, 'input[0].type'],
    [{ tool_choice: { type: 'web_search' } }, /tool_choice/, 'tool_choice'],
    [{ truncation: 'auto' }, /truncation/, 'truncation'],
    [{ include: ['file_search_call.results'] }, /file_search_call\.results/, 'include[0]'],
    [{ text: { format: { type: 'grammar' } } }, /text\.format/, 'text.format'],
    [{ prompt: { id: 'pmpt_1' } }, /prompt/, 'prompt'],
    [{ max_tool_calls: 3 }, /max_tool_calls/, 'max_tool_calls'],
  ]
  for (const [extra, named, param] of cases)
    refused(t, () => chatRequestOf({ ...base, ...extra }, { type: 'anthropic' }), named, param)
  // At the intake: only when a deployment of the model needs the translation.
  const route = (deployments: Deployment[]) => ({ config: {} as never, deployments })
  const body = { kind: 'json' as const, value: { ...base, tools: [{ type: 'web_search' }] } }
  t.doesNotThrow(() => checkTranslatable('responses', body, route([native])), 'a native deployment takes it')
  refused(t, () => checkTranslatable('responses', body, route([native, chatOnly('anthropic')])), /web_search/)
  refused(
    t,
    () =>
      checkTranslatable(
        'responses',
        { kind: 'json', value: { ...base, reasoning: { effort: 'low' } } },
        route([chatOnly('anthropic'), chatOnly('bedrock')]),
      ),
    /bedrock/,
  )
})

const chatReply = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1700000000,
  model: 'claude-upstream',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Bonjour.' }, finish_reason: 'stop' }],
  usage: {
    prompt_tokens: 4934,
    completion_tokens: 56,
    total_tokens: 4990,
    prompt_tokens_details: { cached_tokens: 3000, cache_write_tokens: 700 },
    completion_tokens_details: { reasoning_tokens: 5 },
  },
}

t.test('a whole reply: the response object, with the usage exactly as reported', async (t) => {
  const response = responseOfChat(chatReply, { model: 'claude', instructions: 'Be brief.', metadata: { a: '1' } })
  t.match(response, {
    object: 'response',
    status: 'completed',
    model: 'claude-upstream',
    created_at: 1700000000,
    instructions: 'Be brief.',
    store: false,
    metadata: { a: '1' },
    output: [
      {
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: 'Bonjour.', annotations: [] }],
      },
    ],
    usage: {
      input_tokens: 4934,
      input_tokens_details: { cached_tokens: 3000, cache_write_tokens: 700 },
      output_tokens: 56,
      output_tokens_details: { reasoning_tokens: 5 },
      total_tokens: 4990,
    },
  })
  t.match(String(response.id), /^resp_/)
  const cut = responseOfChat(
    { ...chatReply, choices: [{ index: 0, message: { content: 'Bon' }, finish_reason: 'length' }] },
    {},
  )
  t.match(cut, {
    status: 'incomplete',
    incomplete_details: { reason: 'max_output_tokens' },
    output: [{ status: 'incomplete' }],
  })
  // Required members, as OpenAI's published document lists them.
  const required = schemaRequired('Response')
  for (const member of required) t.ok(member in response, `Response.${member}`)
})

t.test(
  'replyFor: an error status and a native deployment go as they came; a JSON reply is translated whole',
  async (t) => {
    const error: UpstreamResponse = {
      status: 400,
      headers: { 'content-type': 'application/json' },
      body: Readable.from(['{"error":{}}']),
    }
    t.equal(replyFor(error, call({ model: 'm', input: 'Hi' }), chatOnly('anthropic')), error)
    const ok: UpstreamResponse = {
      status: 200,
      headers: { 'content-type': 'application/json', 'content-length': '999' },
      body: Readable.from([JSON.stringify(chatReply)]),
    }
    t.equal(replyFor(ok, call({ model: 'm', input: 'Hi' }), native), ok)
    const translated = replyFor(ok, call({ model: 'm', input: 'Hi' }), chatOnly('anthropic'))
    t.notOk('content-length' in translated.headers, 'the translated body has a length of its own')
    let text = ''
    for await (const chunk of translated.body) text += String(chunk)
    t.match(JSON.parse(text), { object: 'response', usage: { input_tokens: 4934, output_tokens: 56 } })
  },
)

/** The stream's events, parsed. */
function eventsOf(sse: string): Array<Record<string, unknown> & { type: string }> {
  return sse
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const lines = frame.split('\n')
      const named = lines.find((l) => l.startsWith('event: '))?.slice(7)
      const data = JSON.parse(lines.find((l) => l.startsWith('data: '))?.slice(6) ?? 'null') as Record<
        string,
        unknown
      > & { type: string }
      if (named !== data.type) throw new Error(`event: ${String(named)} for a ${data.type}`)
      return data
    })
}

const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
  JSON.stringify({
    id: 'c1',
    object: 'chat.completion.chunk',
    created: 1700000000,
    model: 'up',
    choices: [{ index: 0, delta, finish_reason: finish }],
  })

t.test('a stream: reasoning, text, a tool call, then response.completed with the usage', async (t) => {
  const stream = new ResponsesStream({ model: 'claude', tools: [] })
  let sse = ''
  sse += stream.data(chunk({ role: 'assistant', content: '' }))
  sse += stream.data(
    chunk({ reasoning_content: 'Let me ', thinking_blocks: [{ type: 'thinking', thinking: 'Let me ' }] }),
  )
  sse += stream.data(
    chunk({ reasoning_content: 'think.', thinking_blocks: [{ type: 'thinking', thinking: 'think.' }] }),
  )
  sse += stream.data(chunk({ thinking_blocks: [{ type: 'thinking', thinking: '', signature: 'sig' }] }))
  sse += stream.data(chunk({ content: 'Checking' }))
  sse += stream.data(chunk({ content: '.' }))
  sse += stream.data(
    chunk({
      tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } }],
    }),
  )
  sse += stream.data(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }))
  sse += stream.data(chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }))
  sse += stream.data(chunk({}, 'tool_calls'))
  sse += stream.data(JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: chatReply.usage }))
  sse += stream.data('[DONE]')
  t.equal(stream.data('[DONE]'), '', 'ended once')
  const events = eventsOf(sse)
  t.same(
    events.map((e) => e.type),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.reasoning_summary_part.added',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.delta',
      'response.reasoning_summary_text.done',
      'response.reasoning_summary_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ],
  )
  t.same(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
    'numbered in order',
  )
  // Every event has the members OpenAI's document requires of its type.
  for (const event of events) {
    for (const member of eventRequired(event.type)) t.ok(member in event, `${event.type}.${member}`)
  }
  const completed = events.at(-1)?.response as Record<string, unknown>
  const output = completed.output as Array<Record<string, unknown>>
  t.same(
    output.map((i) => i.type),
    ['reasoning', 'message', 'function_call'],
  )
  t.same(output[0]?.summary, [{ type: 'summary_text', text: 'Let me think.' }])
  t.same(carriedOf(output[0]?.encrypted_content)?.thinking, [
    { type: 'thinking', thinking: 'Let me think.', signature: 'sig' },
  ])
  t.match(output[2], { call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' })
  t.match(completed.usage, {
    input_tokens: 4934,
    output_tokens: 56,
    input_tokens_details: { cached_tokens: 3000 },
    output_tokens_details: { reasoning_tokens: 5 },
  })
  t.equal(completed.status, 'completed')
})

t.test(
  'a stream cut by the cap is incomplete; an error chunk is an error event; no [DONE] still completes',
  async (t) => {
    const cut = new ResponsesStream({})
    const events = eventsOf(cut.data(chunk({ content: 'Bon' })) + cut.data(chunk({}, 'length')) + cut.end())
    t.match(events.at(-1), {
      type: 'response.incomplete',
      response: { status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } },
    })
    const broken = new ResponsesStream({})
    const failed = eventsOf(
      broken.data(chunk({ content: 'Bon' })) +
        broken.data(JSON.stringify({ error: { message: 'overloaded', type: 'server_error', code: 'upstream_error' } })),
    )
    t.match(failed.at(-1), { type: 'error', code: 'upstream_error', message: 'overloaded', param: null })
    t.equal(broken.end(), '', 'nothing after the error')
    const transform = replyFor(
      {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: Readable.from([`data: ${chunk({ content: 'Hi' })}\n\n`]),
      },
      call({ model: 'm', input: 'Hi', stream: true }, true),
      chatOnly('gemini'),
    )
    let sse = ''
    for await (const piece of transform.body) sse += String(piece)
    t.equal(eventsOf(sse).at(-1)?.type, 'response.completed')
  },
)

// ---- OpenAI's published OpenAPI document ----
interface Schema {
  required?: string[]
  properties?: Record<string, { enum?: string[] }>
  allOf?: Schema[]
  $ref?: string
}
const doc = JSON.parse(readFileSync(new URL('../fixtures/openai/openapi.json', import.meta.url), 'utf8')) as {
  components: { schemas: Record<string, Schema> }
}
function schemaRequired(name: string): string[] {
  const seen = new Set<string>()
  const walk = (schema: Schema | undefined): void => {
    if (schema === undefined) return
    for (const member of schema.required ?? []) seen.add(member)
    for (const part of schema.allOf ?? [])
      walk(part.$ref ? doc.components.schemas[part.$ref.split('/').at(-1) ?? ''] : part)
  }
  walk(doc.components.schemas[name])
  return [...seen]
}
/** The required members of the stream event of `type` (the Response*Event schema whose `type` enum names it). */
function eventRequired(type: string): string[] {
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    if (!name.startsWith('Response') || !name.endsWith('Event')) continue
    if (schema.properties?.type?.enum?.includes(type)) return schema.required ?? []
  }
  throw new Error(`no event schema for ${type}`)
}
