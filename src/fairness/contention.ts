// Who is above its fair share right now, as /v2 needs to know it: at once, with no store
// round trip of its own. /v2 does not wait, so it cannot let the party with the lowest
// counter go next as the capacity line does (vtc.ts fairest); what it can do is keep some
// of a contended deployment for the parties below their share (capacity-share.ts). For that
// it must know, when a call arrives, whether its party's counter is above that of another
// party that wants room now.
//
// "Wants room now" is "was charged within CONTEND_MS": every call is charged when the
// limiter admits it and again when it settles, a call refused for room included (its
// charge goes back), so a party whose clients keep calling is charged all the time, and one
// that stopped is not. The window is short (unlike vtc.ts ACTIVE_MS, which decides credit
// for idle time) because a party that stopped wanting room should stop holding any back.
//
// Each flush of a gateway's charges (shares.ts, every 20 ms while calls come) brings back
// where the parties stand in the same answer (store.ts chargeMany): the counters it charged
// and the two lowest counters of the contending parties, over every instance's charges.
// A party's standing is read from the last such answer here, with the charges this gateway
// has not sent yet added; an answer older than CONTEND_MS says nothing (nobody is above).
import type { PartyState } from './vtc.ts'

/** A party charged this recently wants room now (see above). */
export const CONTEND_MS = 1000

/** Where the parties of a scope stand after a flush of charges (store.ts chargeMany). */
export interface Standing {
  /** The counters of the parties just charged, as charged. */
  readonly charged: ReadonlyArray<readonly [string, number]>
  /** The two lowest counters of the parties charged within contendMs (fewer when fewer are), lowest first. */
  readonly lowest: ReadonlyArray<readonly [string, number]>
}

/** The two lowest counters among the parties charged within `contendMs` (the memory store's side of the Lua). */
export function lowestContending(
  states: ReadonlyMap<string, PartyState>,
  now: number,
  contendMs: number,
): Array<readonly [string, number]> {
  const lowest: Array<readonly [string, number]> = []
  for (const [party, state] of states) {
    if (now - state.activeAt > contendMs) continue
    const [first, second] = lowest
    if (first === undefined || state.counter < first[1])
      lowest.splice(0, 2, [party, state.counter], ...(first ? [first] : []))
    else if (second === undefined || state.counter < second[1]) lowest.splice(1, 1, [party, state.counter])
  }
  return lowest
}

export interface Standings {
  /** A flush's answer in `scope`, at `now`. */
  saw(scope: string, standing: Standing, now: number): void
  /**
   * Whether `party` is above its share in `scope`: its counter, plus `pending` (its charges
   * not sent yet), is above the lowest counter of another party contending. False when
   * nothing recent is known of the scope or of the party.
   */
  above(scope: string, party: string, pending: number, now: number): boolean
}

interface Seen {
  at: number
  lowest: Standing['lowest']
  /** Each party's counter as last charged, and when. */
  readonly counters: Map<string, { counter: number; at: number }>
}

/** The scopes kept at most (the least recently seen go first), and the parties per scope. */
const MAX_SCOPES = 1000
const MAX_PARTIES = 10_000

export function createStandings(contendMs: number = CONTEND_MS): Standings {
  const scopes = new Map<string, Seen>()
  return {
    saw(scope, standing, now) {
      let seen = scopes.get(scope)
      scopes.delete(scope)
      if (seen === undefined) seen = { at: now, lowest: [], counters: new Map() }
      scopes.set(scope, seen)
      if (scopes.size > MAX_SCOPES) scopes.delete(scopes.keys().next().value as string)
      seen.at = now
      seen.lowest = standing.lowest
      for (const [party, counter] of standing.charged) {
        seen.counters.delete(party)
        seen.counters.set(party, { counter, at: now })
      }
      // The lowest are as fresh as anything charged here.
      for (const [party, counter] of standing.lowest) {
        const mine = seen.counters.get(party)
        if (mine !== undefined) mine.counter = counter
      }
      if (seen.counters.size > MAX_PARTIES) {
        for (const [party, c] of seen.counters) if (now - c.at > contendMs) seen.counters.delete(party)
      }
    },
    above(scope, party, pending, now) {
      const seen = scopes.get(scope)
      if (seen === undefined || now - seen.at > contendMs) return false
      const own = seen.counters.get(party)
      if (own === undefined || now - own.at > contendMs) return false
      const other = seen.lowest.find(([p]) => p !== party)
      return other !== undefined && own.counter + pending > other[1]
    },
  }
}
