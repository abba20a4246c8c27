// Whether this instance is serving client requests: now, or within the last QUIET_MS. The
// batch runner keeps fewer of a batch's lines in flight while it is (batches/runner.ts
// busyWindow): its lines run in the same process as the clients' calls, so a batch at full
// pace would take the CPU their latency needs. A caller with gaps between its calls (one
// every 250 ms) still counts as there: a window refilled in each gap would be running when
// its next call came. A batch uses the room clients leave in time as well as in the key's
// limits (limits/pools.ts).
export interface ClientCalls {
  begin(): void
  end(): void
  /** Requests being handled now, or one ended within QUIET_MS (those app.ts counts: not the Batch API's own, health or metrics). */
  busy(): boolean
}

/** How long after its last request a client still counts as there. */
export const QUIET_MS = 1000

export function clientCalls(now: () => number = Date.now): ClientCalls {
  let active = 0
  let lastEnded = -Infinity
  return {
    begin: () => void active++,
    end() {
      active--
      lastEnded = now()
    },
    busy: () => active > 0 || now() - lastEnded < QUIET_MS,
  }
}
