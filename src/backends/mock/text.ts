// The mock's replies: a fixed opening that says what answered and tags the prompt with a
// short hash, then sentences drawn from a small vocabulary by a generator seeded from
// that prompt. The same prompt always gets the same words; another prompt gets others.
//
// A reply is cut to an exact budget of tokens as the tokenizer counts them. Every piece
// starts a new pre-token (a leading space, or punctuation after a word), and the BPE never
// merges across pre-tokens, so the token count of the reply is the sum of its pieces'.
// The streamed deltas are these same pieces, so the stream adds up to the JSON reply.
import { contentText, type Encoder } from '../../tokenizer/tokens.ts'
import { digest, randomFrom, seedOf } from './hash.ts'

/** Each word below is one token with a leading space (and so is each capitalised determiner). */
const DETERMINERS = ['the', 'a', 'every', 'this', 'that', 'each', 'one', 'some'] as const
const ADJECTIVES = [
  'quiet',
  'small',
  'short',
  'plain',
  'clear',
  'local',
  'fast',
  'slow',
  'early',
  'late',
  'ready',
  'open',
  'safe',
  'calm',
  'warm',
  'cold',
  'bright',
  'green',
  'blue',
  'red',
  'golden',
  'silver',
  'gentle',
  'honest',
  'patient',
  'useful',
  'simple',
  'steady',
  'careful',
] as const
const NOUNS = [
  'gateway',
  'backend',
  'reply',
  'token',
  'stream',
  'request',
  'answer',
  'model',
  'limit',
  'rate',
  'key',
  'route',
  'proxy',
  'cache',
  'queue',
  'worker',
  'signal',
  'budget',
  'word',
  'line',
  'text',
  'sample',
  'test',
  'river',
  'stone',
  'cloud',
  'light',
  'water',
  'garden',
  'window',
  'table',
  'letter',
  'number',
  'circle',
  'bridge',
  'forest',
  'market',
] as const
const VERBS = [
  'counts',
  'streams',
  'waits',
  'answers',
  'listens',
  'moves',
  'holds',
  'keeps',
  'sends',
  'opens',
  'reads',
  'writes',
  'runs',
  'turns',
  'finds',
  'carries',
  'follows',
  'returns',
  'passes',
  'meets',
] as const
const PREPOSITIONS = [
  'through',
  'under',
  'over',
  'between',
  'across',
  'before',
  'after',
  'beside',
  'near',
  'past',
  'toward',
  'within',
  'behind',
  'around',
] as const

const OPENING = ['This', ' is', " Tollgate's", ' mock', ' backend', ' replying', ' to', ' prompt'] as const

export interface GeneratedText {
  readonly text: string
  /** The text in stream order: one event each. Joined, they are `text`. */
  readonly pieces: readonly string[]
  /** The tokenizer's count of text. */
  readonly tokens: number
}

/**
 * A reply of exactly `budget` tokens to the prompt summarised by `seedText`. `variant`
 * tells apart the choices of one request (n > 1); variant 0 is the reply to a lone request.
 */
export function generateText(seedText: string, variant: number, budget: number, encoder: Encoder): GeneratedText {
  const costs = new Map<string, number>()
  const costOf = (piece: string): number => {
    let cost = costs.get(piece)
    if (cost === undefined) costs.set(piece, (cost = encoder.count(piece)))
    return cost
  }
  const pieces: string[] = []
  let used = 0
  for (const piece of words(seedText, variant)) {
    if (used >= budget) break
    const cost = costOf(piece)
    // The prompt tag and "Tollgate's" take several tokens; near the end of a tight budget
    // they are skipped and one-token words fill the rest.
    if (used + cost > budget) continue
    pieces.push(piece)
    used += cost
  }
  return settle(pieces, budget, encoder)
}

/** The endless word source; generateText decides where it stops. */
function* words(seedText: string, variant: number): Generator<string, never> {
  // The prompt is hashed once: it may be megabytes long.
  const hash = digest(seedText).toString('hex')
  yield* OPENING
  // Six hex digits: enough to tell prompts apart in a reply, short enough to read.
  yield ` #${hash.slice(0, 6)}`
  yield '.'
  const random = randomFrom(seedOf(`${variant}\u0000${hash}`))
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T
  for (;;) {
    const det = pick(DETERMINERS)
    yield ` ${det.charAt(0).toUpperCase()}${det.slice(1)}`
    yield ` ${pick(ADJECTIVES)}`
    yield ` ${pick(NOUNS)}`
    yield ` ${pick(VERBS)}`
    yield ` ${pick(PREPOSITIONS)}`
    yield ` ${pick(DETERMINERS)}`
    if (random() < 0.5) yield ` ${pick(ADJECTIVES)}`
    yield ` ${pick(NOUNS)}`
    yield '.'
  }
}

/**
 * Checks the sum of the pieces against a count of the whole text. They agree by the
 * argument at the top of this file; should a tokenizer upgrade ever break it, this trims
 * or pads the reply so that the budget still holds exactly (or as near as it can).
 */
function settle(pieces: string[], budget: number, encoder: Encoder): GeneratedText {
  let text = pieces.join('')
  let tokens = encoder.count(text)
  for (let guard = 0; tokens !== budget && guard < 2 * budget + 2; guard++) {
    if (tokens > budget && pieces.length > 0) pieces.pop()
    else if (tokens < budget) pieces.push(' mock')
    else break
    text = pieces.join('')
    tokens = encoder.count(text)
  }
  return { text, pieces, tokens }
}

/** What a chat-style prompt is, for seeding: roles and text, not formatting. */
export function seedOfMessages(messages: readonly unknown[]): string {
  return JSON.stringify(
    messages.map((message) => {
      if (!message || typeof message !== 'object') return ['', '']
      const m = message as Record<string, unknown>
      return [typeof m.role === 'string' ? m.role : '', contentText(m.content)]
    }),
  )
}
