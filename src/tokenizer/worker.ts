// The tokenizer's thread: counts texts in pieces (chunked-count.ts) so the gateway's event
// loop never runs the encoder, and the encoder's ~50 MB of tables are loaded only here,
// only once something needs an exact count. Besides the budgeted count of a prompt or a
// completion, it answers the two questions the mock backend asks of the short replies it
// makes (backends/mock/text.ts, json-reply.ts): each text's own count, and the longest
// prefix of a text within a number of tokens.
import { parentPort } from 'node:worker_threads'
import { countTokens } from 'gpt-tokenizer'
import { countInPieces, type Encoder } from './chunked-count.ts'
import { longestPrefixWithin, type Prefix } from './prefix.ts'

/** The tokens of `texts`: the first `budgetChars` characters counted, the rest estimated. */
export interface CountRequest {
  readonly id: number
  readonly op: 'count'
  readonly texts: readonly string[]
  readonly budgetChars: number
}

/** Each of `texts`' exact count, whole: for short texts the gateway made itself. */
export interface EachRequest {
  readonly id: number
  readonly op: 'each'
  readonly texts: readonly string[]
}

/** The longest prefix of `text` within `limit` tokens. */
export interface FitRequest {
  readonly id: number
  readonly op: 'fit'
  readonly text: string
  readonly limit: number
}

export type TokenizerRequest = CountRequest | EachRequest | FitRequest

export interface CountReply {
  readonly id: number
  readonly tokens: number
  readonly exact: boolean
}

export interface EachReply {
  readonly id: number
  readonly counts: readonly number[]
}

export interface FitReply {
  readonly id: number
  readonly prefix: Prefix
}

export type TokenizerReply = CountReply | EachReply | FitReply

/** The worker's first message: the encoder is loaded, counts are answered from now on. */
export interface WorkerReady {
  readonly ready: true
}

const encoder: Encoder = { count: (text) => (text.length === 0 ? 0 : countTokens(text)) }

function answer(request: TokenizerRequest): TokenizerReply {
  switch (request.op) {
    case 'count': {
      const { tokens, exact } = countInPieces(encoder, request.texts, request.budgetChars)
      return { id: request.id, tokens, exact }
    }
    case 'each':
      return { id: request.id, counts: request.texts.map((text) => encoder.count(text)) }
    case 'fit':
      return { id: request.id, prefix: longestPrefixWithin(encoder.count, request.text, request.limit) }
  }
}

parentPort?.on('message', (request: TokenizerRequest) => parentPort?.postMessage(answer(request)))
parentPort?.postMessage({ ready: true } satisfies WorkerReady)
