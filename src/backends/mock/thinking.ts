// Extended thinking, the way Claude (and Gemini, through the same translation) does it, in
// the form the gateway carries it inside a chat completion (protocols/anthropic/request-in.ts
// and backends/anthropic/): the request asks with `thinking` ({type: "enabled",
// budget_tokens} or {type: "adaptive"}); the reply's message carries the thought as
// reasoning_content and, signed, as thinking_blocks; a stream carries it as pieces of
// reasoning_content and thinking_blocks, the last piece bearing the signature. An assistant
// turn sent back carries its thinking_blocks, which must be the mock's own, unchanged: the
// signature is an HMAC of the thought under a key the mock alone uses, so every mock (and
// every gateway instance, and a restarted one) recognises its own blocks, and a block that
// was edited, forged or dropped on the way is refused the way Anthropic refuses it.
//
// The mock thinks briefly (its usual prose length, within the budget); thinking tokens are
// output tokens, and Anthropic's max_tokens covers thought and answer together, so the
// answer gets what the thought leaves of the request's limit.
import { createHmac, timingSafeEqual } from 'node:crypto'
import type { ChatReply } from './chat-reply.ts'
import { invalidRequest } from './errors.ts'
import type { Generation } from './generation.ts'
import { generateText } from './text.ts'

/** Anthropic's least budget_tokens. */
export const MIN_BUDGET_TOKENS = 1024

/** Not a secret: the mock's signatures only say "this block is the mock's own, unchanged". */
const SIGNING_KEY = 'tollgate mock backend: extended thinking'

type Source = Readonly<Record<string, unknown>>

const isRecord = (value: unknown): value is Source =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** What the request asked to think: undefined when it did not (absent, or "disabled"). */
export interface ThinkingRequest {
  /** budget_tokens ("enabled"); undefined for "adaptive", where the mock sets its own. */
  readonly budget: number | undefined
}

/** `thinking` of a chat body, checked as Anthropic checks it (budget at least 1024, below max_tokens). */
export function readThinking(body: Source, limit: number | undefined): ThinkingRequest | undefined {
  const thinking = body.thinking
  if (thinking === undefined || thinking === null) return undefined
  if (!isRecord(thinking)) throw invalidRequest("Invalid type for 'thinking': expected an object.", 'thinking')
  switch (thinking.type) {
    case 'disabled':
      return undefined
    case 'adaptive':
      return { budget: undefined }
    case 'enabled': {
      const budget = thinking.budget_tokens
      if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < MIN_BUDGET_TOKENS)
        throw invalidRequest(
          `thinking.budget_tokens: Input should be an integer of at least ${MIN_BUDGET_TOKENS}.`,
          'thinking.budget_tokens',
        )
      if (limit !== undefined && limit <= budget)
        throw invalidRequest('`max_tokens` must be greater than `thinking.budget_tokens`.', 'max_tokens')
      return { budget }
    }
    default:
      throw invalidRequest("thinking.type: Input should be 'enabled', 'adaptive' or 'disabled'.", 'thinking.type')
  }
}

/** The mock's signature of a thought. */
export function signThought(thought: string): string {
  return createHmac('sha256', SIGNING_KEY).update(thought).digest('base64')
}

function isOwnSignature(thought: string, signature: string): boolean {
  const expected = Buffer.from(signThought(thought))
  const given = Buffer.from(signature)
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/**
 * The thinking blocks of the assistant turns sent back: each the mock's own, unchanged (it
 * makes no redacted ones). With thinking on, an assistant turn whose tool calls the
 * conversation is still answering (only tool results after it) must start with its thinking,
 * as Anthropic requires: a gateway that dropped the blocks is caught here.
 */
export function checkThinkingBlocks(messages: readonly unknown[], thinking: ThinkingRequest | undefined): void {
  for (const [i, message] of messages.entries()) {
    if (!isRecord(message) || message.role !== 'assistant' || message.thinking_blocks === undefined) continue
    const blocks = message.thinking_blocks
    if (!Array.isArray(blocks)) throw invalidRequest(`messages.${i}.thinking_blocks: expected an array.`, 'messages')
    for (const [j, block] of blocks.entries()) {
      const at = `messages.${i}.thinking_blocks.${j}`
      if (!isRecord(block)) throw invalidRequest(`${at}: expected a thinking block.`, 'messages')
      if (block.type === 'redacted_thinking')
        throw invalidRequest(`${at}: Invalid \`data\` in \`redacted_thinking\` block.`, 'messages')
      if (
        block.type !== 'thinking' ||
        typeof block.thinking !== 'string' ||
        typeof block.signature !== 'string' ||
        !isOwnSignature(block.thinking, block.signature)
      )
        throw invalidRequest(`${at}: Invalid \`signature\` in \`thinking\` block.`, 'messages')
    }
  }
  if (thinking === undefined) return
  let last = messages.length - 1
  while (last >= 0 && isRecord(messages[last]) && (messages[last] as Source).role === 'tool') last--
  const turn = messages[last]
  if (last === messages.length - 1 || !isRecord(turn) || turn.role !== 'assistant') return
  if (!Array.isArray(turn.thinking_blocks) || turn.thinking_blocks.length === 0)
    throw invalidRequest(
      `messages.${last}: Expected \`thinking\` or \`redacted_thinking\`, but found none. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block.`,
      'messages',
    )
}

/** A thought, signed: its text, its stream pieces and its tokens. */
export interface Thought {
  readonly text: string
  readonly pieces: readonly string[]
  readonly signature: string
  readonly tokens: number
}

/**
 * The mock's thought about a prompt: its usual prose length, within the budget, and leaving
 * at least one token of the request's limit for the answer.
 */
export async function think(
  seed: string,
  thinking: ThinkingRequest,
  generation: Generation,
  proseTokens: number,
): Promise<Thought> {
  let tokens = Math.min(proseTokens, thinking.budget ?? proseTokens)
  if (generation.limit !== undefined) tokens = Math.min(tokens, generation.limit - 1)
  if (tokens < 1) return { text: '', pieces: [], signature: signThought(''), tokens: 0 }
  const text = await generateText(`thinking\u0000${seed}`, 0, tokens, 'stop')
  return { text: text.text, pieces: text.pieces, signature: signThought(text.text), tokens: text.tokens }
}

/** What the answer may take after the thought: Anthropic's max_tokens covers both. */
export function afterThought(generation: Generation, thought: Thought): Generation {
  if (generation.limit === undefined) return generation
  const limit = Math.max(1, generation.limit - thought.tokens)
  return { ...generation, limit, budget: Math.min(generation.budget, limit) }
}

/** A reply with the thought before its answer: in the message, first in the stream, and in its tokens. */
export function withThought(reply: ChatReply, thought: Thought): ChatReply {
  const block = { type: 'thinking', thinking: thought.text, signature: thought.signature }
  return {
    ...reply,
    message: { ...reply.message, reasoning_content: thought.text, thinking_blocks: [block] },
    pieces: [
      ...thought.pieces.map((piece) => ({
        reasoning_content: piece,
        thinking_blocks: [{ type: 'thinking', thinking: piece }],
      })),
      { thinking_blocks: [{ type: 'thinking', thinking: '', signature: thought.signature }] },
      ...reply.pieces,
    ],
    tokens: reply.tokens + thought.tokens,
  }
}
