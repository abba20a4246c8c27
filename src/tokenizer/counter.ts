// Exact token counts off the event loop, in a worker thread (worker.ts) started on
// the first count and stopped after IDLE_MS without one: a gateway whose upstreams always
// report usage never loads the tokenizer at all. A count that the worker cannot answer in
// time (it is stuck, or it died) falls back to the estimate: a count only ever charges a
// call whose upstream reported no usage, and an estimate is the next best thing there.
// A worker still starting gets longer: loading the encoder's tables took over 10 s on the
// loaded CI machine, and a count that fell back then differed from the same count a moment
// later. A gateway stopping does not wait for it (estimateWaiting).
import { Worker } from 'node:worker_threads'
import { estimateTextTokens } from './estimate-text.ts'
import { longestPrefixWithin, type Prefix } from './prefix.ts'
import type { CountReply, EachReply, FitReply, TokenizerReply, TokenizerRequest, WorkerReady } from './worker.ts'

/** The worker exits after this long without a count, handing its memory back. */
const IDLE_MS = 30_000
/**
 * Past this the count is estimated: the worker should have answered long before (a full
 * budget of characters takes well under a second), unless it is stuck or gone.
 */
const DEADLINE_MS = 10_000
/** The same, for a count sent while the worker is still loading the encoder. */
const START_DEADLINE_MS = 60_000

interface Waiting {
  /** Settles the caller's promise with the worker's reply, or its fallback without one. */
  readonly settle: (reply: TokenizerReply | undefined) => void
  readonly timer: NodeJS.Timeout
}

/** A request as posted, less the id the counter gives it. */
type Unsent<R> = R extends TokenizerRequest ? Omit<R, 'id'> : never

let worker: Worker | null = null
/** The worker has loaded the encoder (its first message says so). */
let ready = false
let idle: NodeJS.Timeout | null = null
let nextId = 1
const waiting = new Map<number, Waiting>()

function settle(id: number, reply?: TokenizerReply): void {
  const entry = waiting.get(id)
  if (!entry) return
  waiting.delete(id)
  clearTimeout(entry.timer)
  entry.settle(reply)
  if (waiting.size === 0) {
    // An idle worker is never what keeps the process alive.
    worker?.unref()
    scheduleIdleStop()
  }
}

function scheduleIdleStop(): void {
  if (idle) clearTimeout(idle)
  idle = setTimeout(() => {
    idle = null
    if (waiting.size === 0 && worker) {
      void worker.terminate()
      worker = null
      ready = false
    }
  }, IDLE_MS)
  idle.unref()
}

function running(): Worker {
  if (worker) return worker
  const started = new Worker(new URL('./worker.ts', import.meta.url))
  started.on('message', (reply: TokenizerReply | WorkerReady) => {
    if ('ready' in reply) ready = worker === started
    else settle(reply.id, reply)
  })
  const lost = (): void => {
    if (worker === started) {
      worker = null
      ready = false
    }
    for (const id of [...waiting.keys()]) settle(id)
  }
  started.on('error', lost)
  started.on('exit', lost)
  worker = started
  return started
}

/**
 * Posts `request` to the worker (starting it if it is not running) and resolves with
 * `take` of its reply (the worker answers each kind of request with its kind of reply, R);
 * with `fallback()` if the worker cannot answer in time.
 */
function ask<R extends TokenizerReply, T>(
  request: Unsent<TokenizerRequest>,
  take: (reply: R) => T,
  fallback: () => T,
): Promise<T> {
  if (idle) clearTimeout(idle)
  idle = null
  const id = nextId++
  return new Promise((resolve) => {
    const timer = setTimeout(() => settle(id), ready ? DEADLINE_MS : START_DEADLINE_MS)
    waiting.set(id, { settle: (reply) => resolve(reply === undefined ? fallback() : take(reply as R)), timer })
    const counter = running()
    counter.ref()
    counter.postMessage({ ...request, id })
  })
}

/** Tokens of `texts` by the tokenizer: the first `budgetChars` characters counted, the rest estimated. */
export function countTexts(texts: readonly string[], budgetChars: number): Promise<number> {
  const nonEmpty = texts.filter((t) => t.length > 0)
  if (nonEmpty.length === 0) return Promise.resolve(0)
  return ask<CountReply, number>(
    { op: 'count', texts: nonEmpty, budgetChars },
    (reply) => reply.tokens,
    () => nonEmpty.reduce((sum, text) => sum + estimateTextTokens(text), 0),
  )
}

/** Each text's own count, whole, by the tokenizer: for short texts the gateway made itself. */
export function countEach(texts: readonly string[]): Promise<number[]> {
  if (texts.length === 0) return Promise.resolve([])
  return ask<EachReply, number[]>(
    { op: 'each', texts },
    (reply) => [...reply.counts],
    () => texts.map((text) => estimateTextTokens(text)),
  )
}

/**
 * Each text's own count by the tokenizer, or undefined when the worker could not answer (no
 * estimate in its place): for counts a caller keeps, which must not be estimates.
 */
export function countEachExact(texts: readonly string[]): Promise<readonly number[] | undefined> {
  if (texts.length === 0) return Promise.resolve([])
  return ask<EachReply, readonly number[] | undefined>(
    { op: 'each', texts },
    (reply) => [...reply.counts],
    () => undefined,
  )
}

/** The longest prefix of `text` within `limit` tokens, by the tokenizer (prefix.ts). */
export function fitPrefix(text: string, limit: number): Promise<Prefix> {
  return ask<FitReply, Prefix>(
    { op: 'fit', text, limit },
    (reply) => reply.prefix,
    () => longestPrefixWithin((piece) => estimateTextTokens(piece), text, limit),
  )
}

/**
 * Answers every count still waiting with its estimate, now (a gateway stopping does not
 * wait for a worker that is slow to start). Returns how many there were.
 */
export function estimateWaiting(): number {
  const ids = [...waiting.keys()]
  for (const id of ids) settle(id)
  return ids.length
}
