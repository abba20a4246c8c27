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
import type { CountReply, CountRequest, WorkerReady } from './worker.ts'

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
  readonly resolve: (tokens: number) => void
  readonly fallback: () => number
  readonly timer: NodeJS.Timeout
}

let worker: Worker | null = null
/** The worker has loaded the encoder (its first message says so). */
let ready = false
let idle: NodeJS.Timeout | null = null
let nextId = 1
const waiting = new Map<number, Waiting>()

function settle(id: number, tokens?: number): void {
  const entry = waiting.get(id)
  if (!entry) return
  waiting.delete(id)
  clearTimeout(entry.timer)
  entry.resolve(tokens ?? entry.fallback())
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
  started.on('message', (reply: CountReply | WorkerReady) => {
    if ('ready' in reply) ready = worker === started
    else settle(reply.id, reply.tokens)
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

/** Tokens of `texts` by the tokenizer: the first `budgetChars` characters counted, the rest estimated. */
export function countTexts(texts: readonly string[], budgetChars: number): Promise<number> {
  const nonEmpty = texts.filter((t) => t.length > 0)
  if (nonEmpty.length === 0) return Promise.resolve(0)
  if (idle) clearTimeout(idle)
  idle = null
  const id = nextId++
  const fallback = (): number => nonEmpty.reduce((sum, text) => sum + estimateTextTokens(text), 0)
  return new Promise((resolve) => {
    const timer = setTimeout(() => settle(id), ready ? DEADLINE_MS : START_DEADLINE_MS)
    waiting.set(id, { resolve, fallback, timer })
    const counter = running()
    counter.ref()
    counter.postMessage({ id, texts: nonEmpty, budgetChars } satisfies CountRequest)
  })
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
