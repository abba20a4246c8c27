// What the semantic cache embeds of a call, and what must be equal for two calls to be
// compared at all (its partition). The embedded text is the call's last user turn only:
// the question a paraphrase rewords. Everything else in the body — the system prompt and
// instructions, the earlier turns, the model's parameters (temperature, tools,
// response_format, max_tokens …) — is the partition, compared byte for byte after the same
// canonical form and the same table of ignored fields as the exact key (key-fields.ts): a
// different system prompt, history or parameter is another partition and never matches,
// however close the question. Embedding the whole conversation instead would let a long
// shared system prompt drown the difference between two questions.
// A last turn that is not plain text (an image, a file, audio, a tool result) is not
// embedded: such a call is looked up exactly only.
import { canonical } from '../store/key-records.ts'
import { answerFields, type CachedEndpoint } from './key-fields.ts'
import { macOf } from './key.ts'

/** The endpoints a semantic lookup serves: a prompt in, a reply out (embeddings are their own cache). */
export type SemanticEndpoint = Exclude<CachedEndpoint, 'embeddings'>

export interface SemanticSplit {
  /** The text embedded: the last user turn. */
  readonly text: string
  /** The body without that turn: the partition's content. */
  readonly rest: Record<string, unknown>
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

/** The text of a message's content when it is only text (a string, or text parts), else undefined. */
function textOf(content: unknown, partType: string): string | undefined {
  if (typeof content === 'string') return content
  if (!Array.isArray(content) || content.length === 0) return undefined
  const texts: string[] = []
  for (const part of content) {
    if (!isObject(part) || part.type !== partType || typeof part.text !== 'string') return undefined
    // A part with anything besides its type and text (cache_control …) changes what is sent: not embedded.
    if (Object.keys(part).length !== 2) return undefined
    texts.push(part.text)
  }
  return texts.join('\n')
}

/** The last of `turns` when it is a user's plain text message (`type` absent or 'message'), split from the others. */
function lastUserTurn(turns: unknown, partType: string): { text: string; earlier: unknown[] } | undefined {
  if (!Array.isArray(turns) || turns.length === 0) return undefined
  const last: unknown = turns.at(-1)
  if (!isObject(last) || last.role !== 'user') return undefined
  if (Object.keys(last).some((k) => k !== 'role' && k !== 'content' && k !== 'type')) return undefined
  if (last.type !== undefined && last.type !== 'message') return undefined
  const text = textOf(last.content, partType)
  return text === undefined ? undefined : { text, earlier: turns.slice(0, -1) }
}

/** The call's embedded text and partition content, or undefined when it has no plain-text last user turn. */
export function semanticSplit(endpoint: SemanticEndpoint, body: Record<string, unknown>): SemanticSplit | undefined {
  let split: SemanticSplit | undefined
  if (endpoint === 'chat.completions') {
    const turn = lastUserTurn(body.messages, 'text')
    if (turn !== undefined) split = { text: turn.text, rest: { ...body, messages: turn.earlier } }
  } else if (endpoint === 'completions') {
    // A list of prompts asks for one reply each: not one question.
    if (typeof body.prompt === 'string') split = { text: body.prompt, rest: { ...body, prompt: null } }
  } else if (typeof body.input === 'string') {
    split = { text: body.input, rest: { ...body, input: null } }
  } else {
    const turn = lastUserTurn(body.input, 'input_text')
    if (turn !== undefined) split = { text: turn.text, rest: { ...body, input: turn.earlier } }
  }
  return split === undefined || split.text.trim() === '' ? undefined : split
}

export interface PartitionParts {
  readonly scope: string
  readonly endpoint: SemanticEndpoint
  readonly model: string
  /** Vectors of two embedding models are never compared. */
  readonly embeddingModel: string
  readonly rest: Record<string, unknown>
}

/** The partition's name: an HMAC, like the exact key, so the store never shows a system prompt or a parameter. */
export function partitionKey(secret: string | Buffer, parts: PartitionParts): string {
  const rest = canonical(answerFields(parts.endpoint, parts.rest))
  return macOf(secret, ['semantic v1', parts.scope, parts.endpoint, parts.model, parts.embeddingModel, rest])
}
