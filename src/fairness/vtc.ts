// The virtual token counter of Sheng et al., "Fairness in Serving Large Language Models"
// (OSDI 2024), as Tollgate keeps it: each party (a key's owner, or the key when it has none)
// has a counter of the tokens it was served divided by its tier's weight, per contended
// scope (a model). Under contention the waiting party with the lowest counter goes next, so
// over any busy stretch the parties' served tokens follow their weights.
//
// The paper lifts a client that becomes backlogged to the least counter of the backlogged
// ones, so time spent idle earns no credit. Backlogs live on many gateways here, so
// "backlogged" is read as "charged within activeMs": a party under contention is charged
// every time it is served, and one that was not charged for that long has been idle. A
// party that comes back is lifted to the least counter of the active ones (never lowered:
// a party that was served more than its share before it left still owes it).
//
// Both stores apply these rules: the memory one by calling them, the Redis one in Lua
// (store.ts), and the contract test holds them to the same answers.

/** A party's counter and when it was last charged (epoch ms). */
export interface PartyState {
  counter: number
  activeAt: number
}

/** A party not charged for this long is idle (its counter is lifted when it comes back). */
export const ACTIVE_MS = 10_000
/** A party idle for this long is forgotten: its counter would be lifted to the active ones' anyway. */
export const FORGET_MS = 10 * 60_000

const isActive = (state: PartyState | undefined, now: number, activeMs: number): boolean =>
  state !== undefined && now - state.activeAt <= activeMs

/** The least counter among the active parties other than `except`; undefined when none is active. */
export function activeFloor(
  states: ReadonlyMap<string, PartyState>,
  now: number,
  activeMs: number,
  except?: string,
): number | undefined {
  let floor: number | undefined
  for (const [party, state] of states) {
    if (party === except || !isActive(state, now, activeMs)) continue
    if (floor === undefined || state.counter < floor) floor = state.counter
  }
  return floor
}

/** What `party` would be ranked by now: its own counter while active, else lifted to the active floor. */
export function effectiveCounter(
  states: ReadonlyMap<string, PartyState>,
  party: string,
  now: number,
  activeMs: number,
): number {
  const state = states.get(party)
  if (state !== undefined && isActive(state, now, activeMs)) return state.counter
  const own = state?.counter ?? 0
  const floor = activeFloor(states, now, activeMs, party)
  return floor === undefined ? own : Math.max(own, floor)
}

/**
 * Charges `delta` weighted tokens to `party` (negative: given back, for a call withdrawn
 * before any upstream served it), lifting it first if it was idle; forgets parties idle
 * for forgetMs. Returns its new counter.
 */
export function charge(
  states: Map<string, PartyState>,
  party: string,
  delta: number,
  now: number,
  activeMs: number,
  forgetMs = FORGET_MS,
): number {
  const counter = effectiveCounter(states, party, now, activeMs) + delta
  if (!isActive(states.get(party), now, activeMs)) {
    for (const [other, state] of states) if (now - state.activeAt > forgetMs) states.delete(other)
  }
  states.set(party, { counter, activeAt: now })
  return counter
}

/**
 * Which of the waiters goes next: the lowest band first (priority before default before
 * flex: priority/classes.ts bandOf), then the lowest counter, then the earliest (the
 * order given). Returns its index, or -1 for no waiters.
 */
export function fairest(waiters: ReadonlyArray<{ readonly band: number; readonly counter: number }>): number {
  let best = -1
  for (let i = 0; i < waiters.length; i++) {
    const w = waiters[i] as { readonly band: number; readonly counter: number }
    const b = best < 0 ? undefined : waiters[best]
    if (b === undefined || w.band < b.band || (w.band === b.band && w.counter < b.counter)) best = i
  }
  return best
}

/** A party: the key's owner (its tenant or user), or the key when it has none. */
export const partyOf = (request: { readonly keyId: string; readonly owner?: string | undefined }): string =>
  request.owner ?? request.keyId
