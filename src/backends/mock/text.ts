// The mock's replies: a fixed opening that says what answered and tags the prompt with a
// short hash, then sentences drawn from a small vocabulary by a generator seeded from
// that prompt. The same prompt always gets the same words; another prompt gets others.
//
// A reply is cut to an exact budget of tokens as the tokenizer counts them. Every piece
// starts a new pre-token (a leading space, or punctuation after a word), and the BPE never
// merges across pre-tokens, so the token count of the reply is the sum of its pieces'.
// The streamed deltas are these same pieces, so the stream adds up to the JSON reply.
// The counting is done by the tokenizer's worker (countEach), so this thread never loads
// the encoder: a few short messages per reply.
import { contentText, countEach, countEachExact, estimateTextTokens } from '../../tokenizer/tokens.ts'
import type { FinishReason } from './generation.ts'
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

const capitalised = (word: string): string => `${word.charAt(0).toUpperCase()}${word.slice(1)}`

/** Every piece words() can yield but the prompt's tag: each reply asks their counts with the tag's. */
const VOCABULARY: readonly string[] = [
  ...OPENING,
  '.',
  ...DETERMINERS.map((det) => ` ${capitalised(det)}`),
  ...[DETERMINERS, ADJECTIVES, NOUNS, VERBS, PREPOSITIONS].flat().map((word) => ` ${word}`),
]

export interface GeneratedText {
  readonly text: string
  /** The text in stream order: one event each. Joined, they are `text`. */
  readonly pieces: readonly string[]
  /** The tokenizer's count of text. */
  readonly tokens: number
}

/**
 * A reply to the prompt summarised by `seedText` that ends as its finish reason says: cut
 * at exactly `budget` tokens ("length": the request's limit ended it), or on the last whole
 * sentence within `budget` ("stop": the mock chose the length, so the reply ends by itself,
 * not mid-sentence). `variant` tells apart the choices of one request (n > 1); variant 0
 * is the reply to a lone request.
 */
export async function generateText(
  seedText: string,
  variant: number,
  budget: number,
  ending: FinishReason = 'length',
): Promise<GeneratedText> {
  // The prompt is hashed once: it may be megabytes long.
  const hash = digest(seedText).toString('hex')
  const tag = promptTag(hash)
  const [costs, [tagCost = 1]] = await Promise.all([vocabularyCosts(), countEach([tag])])
  const costOf = (piece: string): number => (piece === tag ? tagCost : (costs.get(piece) ?? 1))
  const pieces: string[] = []
  let used = 0
  for (const piece of words(hash, tag, variant)) {
    if (used >= budget) break
    const cost = costOf(piece)
    // The prompt tag and "Tollgate's" take several tokens; near the end of a tight budget
    // they are skipped and one-token words fill the rest.
    if (used + cost > budget) continue
    pieces.push(piece)
    used += cost
  }
  if (ending === 'length') return settle(pieces, budget)
  endOnSentence(pieces)
  return settle(
    pieces,
    pieces.reduce((sum, piece) => sum + costOf(piece), 0),
  )
}

/** The vocabulary's counts once the worker has given them (they never change); undefined before. */
let vocabulary: Promise<ReadonlyMap<string, number> | undefined> | undefined

/**
 * Each piece of the vocabulary's token count. Asked of the worker once, not with every reply
 * (130-odd texts a message: most of the worker's work and of the posting cost per mock call);
 * a worker that could not answer is asked again next time, and this reply uses estimates.
 */
async function vocabularyCosts(): Promise<ReadonlyMap<string, number>> {
  vocabulary ??= countEachExact(VOCABULARY).then((counts) =>
    counts === undefined ? undefined : new Map(VOCABULARY.map((piece, i) => [piece, counts[i] ?? 1])),
  )
  const known = await vocabulary
  if (known !== undefined) return known
  vocabulary = undefined
  return new Map(VOCABULARY.map((piece) => [piece, estimateTextTokens(piece)]))
}

/** Cuts the pieces after their last full stop; with none (a budget shorter than the opening), the last piece becomes one. */
function endOnSentence(pieces: string[]): void {
  const end = pieces.lastIndexOf('.')
  if (end >= 0) pieces.length = end + 1
  else if (pieces.length > 0) pieces[pieces.length - 1] = '.'
}

/** Six hex digits of the prompt's hash: enough to tell prompts apart in a reply, short enough to read. */
const promptTag = (hash: string): string => ` #${hash.slice(0, 6)}`

/** The endless word source; generateText decides where it stops. */
function* words(hash: string, tag: string, variant: number): Generator<string, never> {
  yield* OPENING
  yield tag
  yield '.'
  const random = randomFrom(seedOf(`${variant}\u0000${hash}`))
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T
  for (;;) {
    const det = pick(DETERMINERS)
    yield ` ${capitalised(det)}`
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

/** The most further counts settle() asks for after the first. */
const MAX_RECOUNTS = 16

/**
 * Checks the sum of the pieces against a count of the whole text. They agree by the
 * argument at the top of this file; should a tokenizer upgrade ever break it, this trims
 * or pads the reply so that the budget still holds exactly (or as near as it can). Each
 * check is a message to the tokenizer's worker, so there are at most MAX_RECOUNTS: a worker
 * that cannot answer (its counts are then estimates, which need not add up) must not make
 * a reply wait for one round trip per token of its budget.
 */
async function settle(pieces: string[], budget: number): Promise<GeneratedText> {
  const countOf = async (text: string): Promise<number> => (await countEach([text]))[0] ?? 0
  let text = pieces.join('')
  let tokens = await countOf(text)
  for (let guard = 0; tokens !== budget && guard < Math.min(2 * budget + 2, MAX_RECOUNTS); guard++) {
    if (tokens > budget && pieces.length > 0) pieces.pop()
    else if (tokens < budget) pieces.push(' mock')
    else break
    text = pieces.join('')
    tokens = await countOf(text)
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
