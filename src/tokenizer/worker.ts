// The tokenizer's thread: counts texts in pieces (chunked-count.ts) so the gateway's event
// loop never runs the encoder, and the encoder's ~50 MB of tables are loaded only here,
// only once something needs an exact count.
import { parentPort } from 'node:worker_threads'
import { countTokens } from 'gpt-tokenizer'
import { countInPieces, type Encoder } from './chunked-count.ts'

export interface CountRequest {
  readonly id: number
  readonly texts: readonly string[]
  readonly budgetChars: number
}

export interface CountReply {
  readonly id: number
  readonly tokens: number
  readonly exact: boolean
}

/** The worker's first message: the encoder is loaded, counts are answered from now on. */
export interface WorkerReady {
  readonly ready: true
}

const encoder: Encoder = { count: (text) => (text.length === 0 ? 0 : countTokens(text)) }

parentPort?.on('message', (request: CountRequest) => {
  const { tokens, exact } = countInPieces(encoder, request.texts, request.budgetChars)
  parentPort?.postMessage({ id: request.id, tokens, exact } satisfies CountReply)
})
parentPort?.postMessage({ ready: true } satisfies WorkerReady)
