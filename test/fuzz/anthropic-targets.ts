// Anthropic's Messages API as the fuzz attacks it: /v1/messages, its token count and its
// /queue twin (drop-in, and stored with Prefer: respond-async), with bodies shaped like the
// SDK's and Claude Code's (system blocks, multi-turn blocks, images, tools and a tool round
// trip, thinking, cache_control, a stream) and others that no translation should carry (a
// document by file id, an unknown block, a server tool, thinking of a wrong shape, a huge
// or empty content); the generic mutations then retype, remove and add their fields. The
// key comes as x-api-key or as a bearer token; anthropic-version is sent, left out or odd.
// Every answer must be Anthropic's: a message or its stream, or its error shape (check.ts).
import type { FuzzContext, FuzzTarget } from './targets.ts'

const claude = (ctx: FuzzContext): string =>
  ctx.models.chat?.find((m) => m.startsWith('claude')) ?? ctx.models.chat?.[0] ?? 'claude-sonnet-4.5'

const WEATHER = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}

const PNG_B64 = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex').toString('base64')

/** Anthropic's version header as its SDKs send it; then without it, odd, and with a beta. */
const VERSION_HEADERS: ReadonlyArray<ReadonlyArray<readonly [string, string]>> = [
  [['anthropic-version', '2023-06-01']],
  [],
  [['anthropic-version', 'yesterday']],
  [['anthropic-version', '']],
  [
    ['anthropic-version', '2023-06-01'],
    ['anthropic-beta', 'prompt-caching-2024-07-31,interleaved-thinking-2025-05-14'],
  ],
  [
    ['anthropic-version', '2023-06-01'],
    ['anthropic-version', '2099-01-01'],
  ],
]

/** A Messages body of one kind; the templates below cover what Claude Code and the SDK send, and what they must not get through. */
const BODIES: ReadonlyArray<readonly [string, (ctx: FuzzContext) => Record<string, unknown>]> = [
  [
    'plain',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      system: [{ type: 'text', text: 'You are terse.', cache_control: { type: 'ephemeral' } }],
      messages: [
        { role: 'user', content: 'Hello' },
        { role: 'assistant', content: 'Hi.' },
        { role: 'user', content: [{ type: 'text', text: 'Say something.', cache_control: { type: 'ephemeral' } }] },
      ],
      stop_sequences: ['\n\n\n'],
      metadata: { user_id: 'fuzz' },
      temperature: 0.5,
    }),
  ],
  [
    'stream',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      stream: true,
      messages: [{ role: 'user', content: 'Stream something.' }],
    }),
  ],
  [
    'tools',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 32,
      tools: [WEATHER],
      tool_choice: { type: 'auto', disable_parallel_tool_use: true },
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        {
          role: 'assistant',
          content: [
            { type: 'text', text: 'Looking.' },
            { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
          ],
        },
        {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'Sunny' }] }],
        },
      ],
    }),
  ],
  [
    'image',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG_B64 } },
            { type: 'text', text: 'What is this?' },
          ],
        },
      ],
    }),
  ],
  [
    'thinking',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 2048,
      thinking: { type: 'enabled', budget_tokens: 1024 },
      messages: [
        { role: 'user', content: 'Think.' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'Hmm.', signature: 'sig' },
            { type: 'text', text: 'Done.' },
          ],
        },
        { role: 'user', content: 'Again.' },
      ],
    }),
  ],
  [
    'bad-blocks',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'document', source: { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' } },
            { type: 'image', source: { type: 'file', file_id: 'file_fuzz' } },
            { type: 'search_result', source: 'x', title: 't', content: [] },
            { type: 'text' },
            null,
          ],
        },
      ],
    }),
  ],
  [
    'bad-thinking',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      thinking: { type: 'enabled', budget_tokens: 'lots' },
      messages: [
        {
          role: 'assistant',
          content: [{ type: 'redacted_thinking', data: 42 }, { type: 'thinking' }],
        },
      ],
    }),
  ],
  [
    'bad-tools',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      tools: [
        { type: 'web_search_20250305', name: 'web_search', max_uses: 1 },
        { name: 'no_schema' },
        { name: 7, input_schema: [] },
      ],
      tool_choice: { type: 'tool' },
      mcp_servers: [{ type: 'url', url: 'http://127.0.0.1:1/', name: 'x' }],
      container: 'container_fuzz',
      messages: [{ role: 'user', content: 'x' }],
    }),
  ],
  [
    'huge',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 1_000_000_000,
      messages: [{ role: 'user', content: 'word '.repeat(60_000) }],
    }),
  ],
  [
    'empty',
    (ctx) => ({
      model: claude(ctx),
      max_tokens: 16,
      system: [],
      messages: [{ role: 'user', content: [] }, { role: 'assistant', content: '' }, {}],
    }),
  ],
]

const ROUTES: ReadonlyArray<{
  readonly name: string
  readonly path: string
  readonly headers?: typeof VERSION_HEADERS
}> = [
  { name: 'anthropic messages', path: '/v1/messages' },
  { name: 'anthropic count_tokens', path: '/v1/messages/count_tokens' },
  {
    name: 'anthropic queue messages',
    path: '/queue/v1/messages',
    headers: [
      ...VERSION_HEADERS,
      [
        ['anthropic-version', '2023-06-01'],
        ['Prefer', 'respond-async'],
      ],
      [['Prefer', 'respond-async; wait=1, odd']],
    ],
  },
]

/** Every route with every body, half of them with the key as x-api-key (the SDK's), half as a bearer token (Claude Code's). */
export const ANTHROPIC_TARGETS: readonly FuzzTarget[] = ROUTES.flatMap((route) =>
  BODIES.map(([kind, template], i): FuzzTarget => ({
    name: `${route.name} (${kind})`,
    method: 'POST',
    path: route.path,
    auth: i % 2 === 0 ? 'anthropic-key' : 'api-key',
    body: 'json',
    errors: 'anthropic',
    template,
    headers: route.headers ?? VERSION_HEADERS,
  })),
)
