// The mock backend's extended thinking (src/backends/mock/thinking.ts), called through
// adapter.send as the relay calls it, in the chat form the Messages API carries it in: the
// thought in the message and first in the stream, signed; its tokens in completion_tokens
// and reasoning_tokens within max_tokens; the blocks sent back checked; Anthropic's refusals.
import t from 'tap'
import type { UpstreamRequest } from '../../src/backends/port.ts'
import { signThought } from '../../src/backends/mock/thinking.ts'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { dataEvents, json, mockBackend, post, type OpenAIErrorBody } from './mock-helpers.ts'

const backend = mockBackend(t)
const chat = (value: Record<string, unknown>): UpstreamRequest =>
  post('chat.completions', '/chat/completions', {
    model: 'claude-sonnet-4.5',
    messages: [{ role: 'user', content: 'Think about it.' }],
    ...value,
  })
const ENABLED = { type: 'enabled', budget_tokens: 1024 }

interface Completion {
  choices: Array<{
    message: { content: string | null; reasoning_content?: string; thinking_blocks?: Array<Record<string, string>> }
    finish_reason: string
  }>
  usage: { completion_tokens: number; completion_tokens_details: { reasoning_tokens: number } }
}

t.test('a thought, signed, before the answer; its tokens within max_tokens', async (t) => {
  const reply = await json<Completion>(await backend.send(chat({ max_tokens: 1100, thinking: ENABLED })))
  const message = reply.choices[0]?.message
  const block = message?.thinking_blocks?.[0]
  if (message === undefined || block === undefined) throw new Error('no thinking block')
  t.equal(block.type, 'thinking')
  t.equal(block.thinking, message.reasoning_content, 'the thought, as reasoning_content too')
  t.equal(block.signature, signThought(block.thinking ?? ''), "the mock's signature")
  const thoughtTokens = await countTextTokens(block.thinking ?? '')
  t.equal(reply.usage.completion_tokens_details.reasoning_tokens, thoughtTokens, 'reasoning_tokens: the thought')
  t.equal(reply.usage.completion_tokens, 1100, 'thought and answer fill max_tokens')
  t.equal(await countTextTokens(message.content ?? ''), 1100 - thoughtTokens, 'the answer has the rest')

  const plain = await json<Completion>(await backend.send(chat({ max_tokens: 1100 })))
  t.notOk(plain.choices[0]?.message.thinking_blocks, 'no thinking unless asked')
  t.equal(plain.usage.completion_tokens_details.reasoning_tokens, 0)
  const disabled = await json<Completion>(await backend.send(chat({ thinking: { type: 'disabled' } })))
  t.notOk(disabled.choices[0]?.message.thinking_blocks, '"disabled" thinks not')
  const adaptive = await json<Completion>(await backend.send(chat({ thinking: { type: 'adaptive' } })))
  t.ok(adaptive.choices[0]?.message.thinking_blocks?.[0]?.signature, '"adaptive" thinks, at its own length')
  t.equal(adaptive.choices[0]?.finish_reason, 'stop', 'and without a limit the answer ends on its own')
})

t.test('streamed: thought pieces, then the signature, then the answer; usage as in the JSON reply', async (t) => {
  const events = (await dataEvents(
    await backend.send(
      chat({ max_tokens: 1100, thinking: ENABLED, stream: true, stream_options: { include_usage: true } }),
    ),
  )) as Array<{
    choices: Array<{ delta: Record<string, unknown> }>
    usage: Completion['usage'] | null
  }>
  const deltas = events.flatMap((e) => (typeof e === 'object' && e.choices[0] ? [e.choices[0].delta] : []))
  const kinds = deltas.map((d) =>
    Array.isArray(d.thinking_blocks)
      ? (d.thinking_blocks[0] as { signature?: string }).signature === undefined
        ? 'thought'
        : 'signature'
      : typeof d.content === 'string' && d.content !== ''
        ? 'text'
        : 'other',
  )
  const firstText = kinds.indexOf('text')
  t.ok(kinds.indexOf('thought') >= 0 && kinds.indexOf('thought') < kinds.indexOf('signature'), 'thought first')
  t.equal(kinds.filter((k) => k === 'signature').length, 1, 'one signature')
  t.ok(kinds.indexOf('signature') < firstText, 'then the answer')
  const thought = deltas.map((d) => (typeof d.reasoning_content === 'string' ? d.reasoning_content : '')).join('')
  const signature = (
    deltas.find((d) => kinds[deltas.indexOf(d)] === 'signature')?.thinking_blocks as Array<{ signature: string }>
  )[0]?.signature
  t.equal(signature, signThought(thought), 'the signature is of the streamed thought')
  const usage = events.find((e) => typeof e === 'object' && e.usage)?.usage
  t.equal(usage?.completion_tokens, 1100)
  t.equal(usage?.completion_tokens_details.reasoning_tokens, await countTextTokens(thought))
})

t.test("blocks sent back: the mock's own pass; edited, forged, redacted or missing ones are refused", async (t) => {
  const first = await json<Completion>(
    await backend.send(
      chat({
        thinking: ENABLED,
        max_tokens: 2048,
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      }),
    ),
  )
  const message = first.choices[0]?.message as Record<string, unknown>
  const block = (message.thinking_blocks as Array<Record<string, string>>)[0] ?? {}
  const call = (message.tool_calls as Array<{ id: string }>)[0]
  const followUp = (thinkingBlocks: unknown[] | undefined): UpstreamRequest =>
    chat({
      thinking: ENABLED,
      max_tokens: 2048,
      messages: [
        { role: 'user', content: 'Think about it.' },
        { ...message, thinking_blocks: thinkingBlocks },
        { role: 'tool', tool_call_id: call?.id, content: 'done' },
      ],
    })
  const ok = await json<Completion>(await backend.send(followUp([block])))
  t.equal(ok.choices[0]?.finish_reason, 'length', 'answered after the tool result')
  for (const [what, blocks, message] of [
    ['edited', [{ ...block, thinking: `${block.thinking}!` }], /Invalid `signature` in `thinking` block/],
    ['forged', [{ ...block, signature: signThought('another thought') }], /Invalid `signature`/],
    ['redacted', [{ type: 'redacted_thinking', data: 'x' }], /Invalid `data` in `redacted_thinking`/],
    ['dropped', undefined, /must start with a thinking block/],
  ] as const) {
    const refused = await json<OpenAIErrorBody>(await backend.send(followUp(blocks as unknown[] | undefined)), 400)
    t.match(refused.error.message, message, what)
  }
})

t.test("Anthropic's checks of `thinking`", async (t) => {
  for (const [body, message] of [
    [{ thinking: { type: 'enabled', budget_tokens: 1000 } }, /budget_tokens: .*at least 1024/],
    [{ thinking: { type: 'enabled' } }, /budget_tokens/],
    [{ thinking: ENABLED, max_tokens: 1024 }, /`max_tokens` must be greater than `thinking.budget_tokens`/],
    [{ thinking: { type: 'sometimes' } }, /thinking.type/],
    [{ thinking: 'yes' }, /'thinking'/],
  ] as const) {
    const refused = await json<OpenAIErrorBody>(await backend.send(chat(body)), 400)
    t.match(refused.error.message, message, JSON.stringify(body))
  }
})
