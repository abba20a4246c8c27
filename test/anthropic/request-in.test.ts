// Anthropic's Messages request → a chat completions request (src/protocols/anthropic/request-in.ts):
// what is carried over, and what is refused by name rather than dropped.
import t from 'tap'
import { GatewayError } from '../../src/errors.ts'
import { chatRequestOf } from '../../src/protocols/anthropic/request-in.ts'

const base = { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }

function refusal(body: Record<string, unknown>, kind?: 'create' | 'count_tokens'): { name: string; message: string } {
  try {
    chatRequestOf(body, kind)
  } catch (err) {
    if (err instanceof GatewayError) return { name: err.errorName, message: err.message }
    throw err
  }
  return { name: 'ok', message: '' }
}

t.test('the members that have a chat counterpart', async (t) => {
  t.same(
    chatRequestOf({
      ...base,
      system: [
        { type: 'text', text: 'a', cache_control: { type: 'ephemeral' } },
        { type: 'text', text: 'b' },
      ],
      stream: true,
      temperature: 0.2,
      top_p: 0.5,
      top_k: 3,
      stop_sequences: ['X'],
      metadata: { user_id: 'u' },
      tool_choice: { type: 'any' },
      tools: [{ name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }],
      thinking: { type: 'disabled' },
      service_tier: 'auto',
    }),
    {
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'system', content: 'a\n\nb' },
        { role: 'user', content: 'hi' },
      ],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
      top_p: 0.5,
      top_k: 3,
      stop: ['X'],
      user: 'u',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      tool_choice: 'required',
    },
  )
})

t.test(
  'what Claude Code sends on every request: accepted, and asking nothing of a model that cannot think',
  async (t) => {
    const tools = [
      {
        name: 'Bash',
        input_schema: { type: 'object' },
        eager_input_streaming: true,
        cache_control: { type: 'ephemeral', scope: 'global' },
      },
    ]
    const sent = chatRequestOf({
      ...base,
      system: [{ type: 'text', text: 'a', cache_control: { type: 'ephemeral', ttl: '1h', scope: 'global' } }],
      thinking: { type: 'adaptive' },
      output_config: { effort: 'high' },
      context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      diagnostics: { client: 'cli' },
      tools,
    })
    t.same(sent, {
      model: 'm',
      max_tokens: 10,
      messages: [
        { role: 'system', content: 'a' },
        { role: 'user', content: 'hi' },
      ],
      tools: [{ type: 'function', function: { name: 'Bash', parameters: { type: 'object' } } }],
      // For an anthropic backend only (the others are sent the body without it).
      tollgate_anthropic: {
        effort: 'high',
        context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
      },
    })
    t.same(
      chatRequestOf({ ...base, output_config: { effort: 'low' } }).tollgate_anthropic,
      { effort: 'low' },
      'the effort as it came, for an anthropic backend',
    )
    t.same(
      chatRequestOf({ ...base, thinking: { type: 'adaptive' } }, 'create', { thinking: true }).thinking,
      { type: 'adaptive' },
      'carried where the model can think',
    )
    t.equal(
      chatRequestOf({ ...base, output_config: { effort: 'low' } }).reasoning_effort,
      'low',
      'a lower effort is carried',
    )
    t.equal(chatRequestOf({ ...base, output_config: { effort: 'medium' } }).reasoning_effort, 'medium')
    t.equal(refusal({ ...base, context_management: 'all' }).name, 'invalid_body', 'context_management is still checked')
  },
)

t.test('tool_choice: auto, any, tool, none; disable_parallel_tool_use', async (t) => {
  const tools = [{ name: 'f', input_schema: { type: 'object' } }]
  const choice = (tool_choice: unknown): unknown => chatRequestOf({ ...base, tools, tool_choice }).tool_choice
  t.equal(choice({ type: 'auto' }), 'auto')
  t.equal(choice({ type: 'any' }), 'required')
  t.equal(choice({ type: 'none' }), 'none')
  t.same(choice({ type: 'tool', name: 'f' }), { type: 'function', function: { name: 'f' } })
  t.equal(
    chatRequestOf({ ...base, tools, tool_choice: { type: 'auto', disable_parallel_tool_use: true } })
      .parallel_tool_calls,
    false,
  )
})

t.test('a user turn: tool results first as tool messages, then images and text as parts', async (t) => {
  const out = chatRequestOf({
    ...base,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'fine' },
          { type: 'tool_result', tool_use_id: 't2', content: [{ type: 'text', text: 'bad' }], is_error: true },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          { type: 'image', source: { type: 'url', url: 'https://x/y.png' } },
          { type: 'text', text: 'look' },
        ],
      },
    ],
  })
  t.same(out.messages, [
    { role: 'tool', tool_call_id: 't1', content: 'fine' },
    { role: 'tool', tool_call_id: 't2', content: 'Error: bad' },
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        { type: 'image_url', image_url: { url: 'https://x/y.png' } },
        { type: 'text', text: 'look' },
      ],
    },
  ])
})

t.test('max_tokens is required to create a message, not to count its tokens', async (t) => {
  const { max_tokens: _, ...without } = base
  const missing = refusal(without)
  t.equal(missing.name, 'missing_field')
  t.match(missing.message, /^max_tokens: Field required/)
  t.equal(refusal(without, 'count_tokens').name, 'ok')
  t.equal(refusal({ ...base, max_tokens: 0 }).name, 'invalid_body')
})

t.test('what has no counterpart upstream is refused, naming it', async (t) => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ thinking: { type: 'enabled', budget_tokens: 2000 } }, /^thinking is not supported/],
    [{ output_config: { effort: 'max' } }, /^output_config\.effort 'max' is not supported/],
    [{ inference_geo: 'eu' }, /^inference_geo/],
    [{ container: 'c1' }, /^container/],
    [{ mcp_servers: [] }, /^mcp_servers/],
    [{ speed: 'fast' }, /^speed/],
    [{ 'x<script>': 1 }, /^\(an unprintable member\) is not supported/],
    [{ metadata: { user_id: 'u', other: 1 } }, /^metadata\.other/],
    [{ tools: [{ type: 'bash_20250124', name: 'bash' }] }, /server tool 'bash_20250124'/],
    [{ tools: [{ name: 'f', input_schema: {}, input_examples: [] }] }, /^tools\.0\.input_examples/],
    [
      { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', data: 'x' } }] }] },
      /^messages\.0\.content\.0 \(a 'document' block\)/,
    ],
    [
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] },
      /image of source type 'file'/,
    ],
    [
      {
        messages: [
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'hm', signature: 's' }] },
          { role: 'user', content: 'go on' },
        ],
      },
      /^messages\.0\.content\.0 \(a 'thinking' block\)/,
    ],
    [
      {
        messages: [
          {
            role: 'user',
            content: [
              {
                type: 'tool_result',
                tool_use_id: 't',
                content: [{ type: 'image', source: { type: 'url', url: 'u' } }],
              },
            ],
          },
        ],
      },
      /a 'image' block in a tool result/,
    ],
  ]
  for (const [body, message] of cases) {
    const got = refusal({ ...base, ...body })
    t.equal(got.name, 'untranslatable_feature', JSON.stringify(body))
    t.match(got.message, message)
  }
})
