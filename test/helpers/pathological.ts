// Texts that make byte-pair encoding slow: one pre-token as long as the text (a run of one
// character, or of emoji), and random bytes. Shared by the tokenizer-stall test, the
// stall benchmark and the fuzz suite.
import { randomFrom } from '../../src/backends/mock/hash.ts'

export type PathologicalKind = 'repeated' | 'random' | 'emoji'
export const PATHOLOGICAL_KINDS: readonly PathologicalKind[] = ['repeated', 'random', 'emoji']

/** A text of about `bytes` UTF-8 bytes (never more). Deterministic for a given seed. */
export function pathologicalText(kind: PathologicalKind, bytes: number, seed = 1): string {
  switch (kind) {
    case 'repeated':
      return 'a'.repeat(bytes)
    case 'emoji':
      return '\u{1F600}'.repeat(Math.floor(bytes / 4))
    case 'random': {
      // Random bytes read as UTF-8: mostly U+FFFD (3 bytes each), some ASCII and control
      // characters, the odd valid sequence. A third as many bytes keeps it under `bytes`.
      const random = randomFrom(seed)
      const raw = Buffer.alloc(Math.floor(bytes / 3))
      for (let i = 0; i < raw.length; i++) raw[i] = Math.floor(random() * 256)
      return raw.toString('utf8')
    }
  }
}

/** A chat completion body whose one message is `text`. */
export function chatBodyOf(model: string, text: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: text }], max_tokens: 8, ...extra })
}

/** A chat completion body that says "hi" and carries `text` as the description of its one tool. */
export function toolsBodyOf(model: string, text: string, extra: Record<string, unknown> = {}): string {
  const tool = {
    type: 'function',
    function: { name: 'lookup', description: text, parameters: { type: 'object', properties: {} } },
  }
  return JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], tools: [tool], max_tokens: 8, ...extra })
}
