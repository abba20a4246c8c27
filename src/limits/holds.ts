// Holds: what a call in flight reserves on a budget, kept until the call settles.
//
// A hold used to be a windowed counter, so it lapsed with the rate-limit window it was made
// in: a stream that outlived its window freed its budget while it still ran, and the next
// window admitted the same money again (issue #36). Now each call's hold is an entry of its
// own, released by its settle and by nothing else while its instance lives:
//
// - On Redis, a budget's holds are a sorted set of `<hold id>/<cost>` scored by the end of
//   each one's lease, beside their sum. The instance that admitted a call renews its lease
//   while the call runs (LeaseKeeper below), so a call of any length keeps its hold; an
//   instance that dies stops renewing, and its holds lapse one lease later, swept by the
//   next script that reads the budget. Release is by member, so it happens once: a settle
//   that comes twice, or after the sweep, gives nothing back twice.
// - In memory (the embedded store) there is no other instance to outlive: a hold is kept
//   until its settle (MemoryHolds), and a restart starts with none.
import { randomBytes } from 'node:crypto'
import type { Logger } from '../observability/logger.ts'

/** How long a hold outlives the last renewal of its instance. */
export const DEFAULT_LEASE_MS = 30_000

/** Makes hold ids unique across the fleet: a random prefix per process, then a counter. */
export function holdIds(): () => string {
  const prefix = randomBytes(6).toString('base64url')
  let next = 0
  return () => `${prefix}.${(next++).toString(36)}`
}

/** A hold's member in a budget's sorted set: the id, then its cost (the sweep gives the cost back). */
export const holdMember = (hold: string, cost: number): string => `${hold}/${cost}`

// Prepended to the scripts that read or change holds. KEYS z (the sorted set of holds by
// lease end) and t (their sum) live and expire together: every hold and renewal sets both
// to outlive every lease in them, so once they are gone no hold is.
//   heldOn(z, t, now): sweeps leases that ended (a bounded number at a time: more are
//     swept by later calls, and until then counted, the safe side) and answers the sum;
//   hold(z, t, member, cost, now, lease): adds or renews a hold (a member that was swept
//     meanwhile, after an outage longer than a lease, is held again);
//   unhold(z, t, member, cost): releases it, once.
export const HOLDS_LUA = `
local function heldOn(z, t, now)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 256)
  if #gone > 0 then
    local sum = 0
    for _, m in ipairs(gone) do sum = sum + tonumber(string.match(m, '/(%d+)$') or '0') end
    redis.call('ZREM', z, unpack(gone))
    if redis.call('ZCARD', z) == 0 then redis.call('DEL', t) else redis.call('DECRBY', t, sum) end
  end
  local held = tonumber(redis.call('GET', t) or '0')
  if held < 0 then return 0 end
  return held
end
local function hold(z, t, member, cost, now, lease)
  if redis.call('ZADD', z, now + lease, member) == 1 then redis.call('INCRBY', t, cost) end
  redis.call('PEXPIRE', z, 2 * lease)
  redis.call('PEXPIRE', t, 2 * lease)
end
local function unhold(z, t, member, cost)
  if redis.call('ZREM', z, member) == 1 then
    if redis.call('ZCARD', z) == 0 then redis.call('DEL', t) else redis.call('DECRBY', t, cost) end
  end
end
`

/** Holds in this process: per counter name, each call's cost by hold id, and their sum. */
export class MemoryHolds {
  readonly #byName = new Map<string, { total: number; readonly costs: Map<string, number> }>()

  total(name: string): number {
    return this.#byName.get(name)?.total ?? 0
  }

  /** Holds `cost` for `hold` on `name`; answers the sum after it. */
  hold(name: string, hold: string, cost: number): number {
    let entry = this.#byName.get(name)
    if (entry === undefined) this.#byName.set(name, (entry = { total: 0, costs: new Map() }))
    if (!entry.costs.has(hold)) {
      entry.costs.set(hold, cost)
      entry.total += cost
    }
    return entry.total
  }

  /** Releases a hold, once; a hold never made, or released already, changes nothing. */
  release(name: string, hold: string): void {
    const entry = this.#byName.get(name)
    const cost = entry?.costs.get(hold)
    if (entry === undefined || cost === undefined) return
    entry.costs.delete(hold)
    entry.total -= cost
    if (entry.costs.size === 0) this.#byName.delete(name)
  }
}

export interface LeaseKeeper<T> {
  /** Renews `item`'s lease until it is dropped. */
  keep(item: T): void
  /** Stops renewing it (its call settled: the settle released it). */
  drop(item: T): void
  close(): void
}

/**
 * Renews the leases of the holds this instance keeps, every `everyMs` (a third of a lease,
 * so two renewals may fail before one lapses). A renewal that fails (Redis away) is left to
 * the next: a hold that lapsed meanwhile is held again by it.
 */
export function keepLeases<T>(options: {
  readonly everyMs: number
  readonly renew: (items: readonly T[]) => Promise<void>
  readonly log: Logger
}): LeaseKeeper<T> {
  const live = new Set<T>()
  let running = false
  const timer = setInterval(() => {
    if (live.size === 0 || running) return
    running = true
    options
      .renew([...live])
      .catch((error: unknown) =>
        options.log.debug(
          { err: error instanceof Error ? error.message : String(error) },
          'budget holds: renewal failed',
        ),
      )
      .finally(() => {
        running = false
      })
  }, options.everyMs)
  timer.unref()
  return {
    keep: (item) => void live.add(item),
    drop: (item) => void live.delete(item),
    close: () => {
      clearInterval(timer)
      live.clear()
    },
  }
}
