// A batch's room in its key's rate limits: the whole of each limit while no interactive call
// of the key wants any, flex's share of it (priority/classes.ts) while one does.
//
// A batch line carries both: `limits` with flex's share applied, `idleLimits` without it.
// Fixing the share for good would run a 20-RPM key's batch at 16 a minute with the other 4
// left unused; dropping it would let a busy key's batch take the room its interactive calls
// come back for. So the share holds while the key is contended: some call of the key and
// model other than a batch line asked the limiter (admitted or refused, on /v2 or waiting
// in a /queue line, which asks again at its head) within the last window. A quiet key's
// batch uses every request of its window.
//
// On Redis, the asks of every instance count (redis-asks.ts): a line run here keeps to the
// share while the key's calls are served on another instance.
//
// What this cannot promise: the first interactive call after a quiet window may find that
// window already filled by its batch, and waits (/queue) or is refused (/v2) until it resets,
// at most one window; from then on the share holds. docs/batches.md.
import type { ModelLimits } from '../config/schema.ts'
import type { AdmissionRequest, Limiter } from '../limits/port.ts'
import type { AskBoard } from './redis-asks.ts'

/** Interactive asks remembered past this many (key, model) pairs are swept of the stale ones. */
const SWEEP_AT = 10_000

export interface BatchRoomOptions {
  /** The limiter's window: an interactive ask holds the share this long. */
  readonly windowMs: number
  /** The clock (tests move it). Default Date.now. */
  readonly now?: () => number
  /** Every instance's asks (on Redis); absent: this instance's only. */
  readonly shared?: AskBoard
}

/** The limiter, admitting a batch line on the whole of its key's limits while the key is otherwise quiet. */
export function withBatchRoom(limiter: Limiter, options: BatchRoomOptions): Limiter {
  const now = options.now ?? Date.now
  /** When a call of (key, model) other than a batch line last asked. */
  const lastAsked = new Map<string, number>()
  const pairOf = (request: Pick<AdmissionRequest, 'keyId' | 'model'>): string => `${request.keyId}\n${request.model}`

  function noted(request: AdmissionRequest): void {
    const at = now()
    lastAsked.set(pairOf(request), at)
    if (lastAsked.size <= SWEEP_AT) return
    for (const [pair, when] of lastAsked) if (at - when >= options.windowMs) lastAsked.delete(pair)
  }

  /** A batch line as asked: on its idle limits when its key is quiet. */
  async function roomed<R extends AdmissionRequest>(request: R, idleLimits: ModelLimits): Promise<R> {
    const asked = lastAsked.get(pairOf(request))
    if (asked !== undefined && now() - asked < options.windowMs) return request
    if (options.shared !== undefined && (await options.shared.asked(request, request.model))) return request
    return { ...request, limits: idleLimits }
  }

  /** `ask` with the request as asked: any call but a batch line noted as it goes (no wait on its path). */
  function asking<T>(request: AdmissionRequest, ask: (request: AdmissionRequest) => Promise<T>): Promise<T> {
    const { idleLimits } = request
    if (idleLimits !== undefined) return roomed(request, idleLimits).then(ask)
    noted(request)
    options.shared?.note(request, request.model)
    return ask(request)
  }

  const check = limiter.check?.bind(limiter)
  return {
    ...limiter,
    admit: (request) => asking(request, (r) => limiter.admit(r)),
    ...(check === undefined ? {} : { check: (request: AdmissionRequest) => asking(request, check) }),
  }
}
