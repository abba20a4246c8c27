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
// What this cannot promise: the first interactive call after a quiet window may find that
// window already filled by its batch, and waits (/queue) or is refused (/v2) until it resets,
// at most one window; from then on the share holds. And it is this instance's view: on
// Redis, interactive calls another instance served are not seen here (its own batch lines
// see them), so a batch line may fill a window the key is using elsewhere. docs/batches.md.
import type { AdmissionRequest, Limiter } from '../limits/port.ts'

/** Interactive asks remembered past this many (key, model) pairs are swept of the stale ones. */
const SWEEP_AT = 10_000

export interface BatchRoomOptions {
  /** The limiter's window: an interactive ask holds the share this long. */
  readonly windowMs: number
  /** The clock (tests move it). Default Date.now. */
  readonly now?: () => number
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

  /** The request as asked: a batch line on its idle limits when the key is quiet; any other noted. */
  function roomed<R extends AdmissionRequest>(request: R): R {
    const { idleLimits } = request
    if (idleLimits === undefined) {
      noted(request)
      return request
    }
    const asked = lastAsked.get(pairOf(request))
    if (asked !== undefined && now() - asked < options.windowMs) return request
    return { ...request, limits: idleLimits }
  }

  const check = limiter.check?.bind(limiter)
  return {
    ...limiter,
    admit: (request) => limiter.admit(roomed(request)),
    ...(check === undefined ? {} : { check: (request: AdmissionRequest) => check(roomed(request)) }),
  }
}
