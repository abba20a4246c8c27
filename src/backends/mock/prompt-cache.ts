// The mock's prompt cache, so that a mock-backed gateway meters cached tokens as a real
// provider's does (docs/mock.md): a chat request that names a `prompt_cache_key` (OpenAI's
// parameter) has its prompt cached under that key. The next request with the key reads
// from the cache the messages it begins with that the cached prompt also began with, and
// writes the rest (as Anthropic's cache_control on the last message would); a request
// without a key neither reads nor writes. Deterministic for a given order of calls, and
// this mock's alone: bounded, the oldest key forgotten first.
import { countChatTokens } from '../../tokenizer/tokens.ts'

/** What a call's prompt did with the cache: parts of its prompt tokens. */
export interface CacheUse {
  readonly read: number
  readonly write: number
}

const NONE: CacheUse = Object.freeze({ read: 0, write: 0 })
const MAX_KEYS = 1000

export class MockPromptCache {
  /** By key: the cached prompt's messages, each as its JSON text. */
  readonly #prompts = new Map<string, readonly string[]>()

  /** What a prompt of `promptTokens` with these messages reads and writes under `key`; caches it. */
  async use(key: unknown, messages: readonly unknown[], promptTokens: number): Promise<CacheUse> {
    if (typeof key !== 'string' || key === '') return NONE
    const texts = messages.map((m) => JSON.stringify(m))
    const cached = this.#prompts.get(key) ?? []
    let common = 0
    while (common < texts.length && common < cached.length && texts[common] === cached[common]) common++
    this.#prompts.delete(key)
    this.#prompts.set(key, texts)
    if (this.#prompts.size > MAX_KEYS) this.#prompts.delete(this.#prompts.keys().next().value ?? '')
    const read = common === 0 ? 0 : Math.min(await countChatTokens(messages.slice(0, common)), promptTokens)
    return { read, write: promptTokens - read }
  }
}
