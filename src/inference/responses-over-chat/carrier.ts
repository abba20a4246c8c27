// What a chat-only upstream needs back with a later turn and a Responses caller has no
// member for: an anthropic backend's signed thinking (a chat reply's thinking_blocks, which
// must go back unchanged with the turn that called a tool, or the next turn is refused),
// and the thought signature a gemini backend puts on a function call (Gemini 3 wants it
// back with the call: extra_content.google.thought_signature in chat's shape). A Responses
// caller sends back a reasoning item, whose one opaque member is encrypted_content: both
// travel there, as JSON in base64url behind a tag of ours. They are not encrypted (the
// upstream signed them, and checks them); a reasoning item without the tag (OpenAI's own,
// or one with only a summary) carries nothing back.
import { isJsonObject } from '../../json.ts'

const TAG = 'tollgate.reasoning.v1:'

export interface Carried {
  /** Anthropic's thinking and redacted_thinking blocks, in order. */
  readonly thinking: readonly unknown[]
  /** Gemini's thought signatures, by the call_id of the function call each belongs to. */
  readonly signatures: Readonly<Record<string, string>>
}

/** The encrypted_content for what is carried, or undefined when there is nothing. */
export function carrierOf(carried: Carried): string | undefined {
  if (carried.thinking.length === 0 && Object.keys(carried.signatures).length === 0) return undefined
  return TAG + Buffer.from(JSON.stringify(carried)).toString('base64url')
}

/** What an encrypted_content of ours carries, or undefined. */
export function carriedOf(content: unknown): Carried | undefined {
  if (typeof content !== 'string' || !content.startsWith(TAG)) return undefined
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(content.slice(TAG.length), 'base64url').toString('utf8'))
  } catch {
    return undefined
  }
  if (!isJsonObject(value) || !Array.isArray(value.thinking) || !value.thinking.every(isJsonObject)) return undefined
  const signatures: Record<string, string> = {}
  if (isJsonObject(value.signatures))
    for (const [id, signature] of Object.entries(value.signatures))
      if (typeof signature === 'string') signatures[id] = signature
  return { thinking: value.thinking, signatures }
}

/** The thought signature chat's shape puts on a tool call (backends/gemini), if any. */
export function signatureOfCall(call: unknown): string | undefined {
  const extra = isJsonObject(call) ? call.extra_content : undefined
  const google = isJsonObject(extra) ? extra.google : undefined
  const signature = isJsonObject(google) ? google.thought_signature : undefined
  return typeof signature === 'string' ? signature : undefined
}

/** A tool call's home for its thought signature, in chat's shape. */
export const signatureHome = (signature: string): { extra_content: { google: { thought_signature: string } } } => ({
  extra_content: { google: { thought_signature: signature } },
})
