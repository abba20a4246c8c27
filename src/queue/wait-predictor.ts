// The predicted wait of a drop-in call when it joins its key's line (deadline.ts decides
// what to do with it): the larger of what the key's limits allow (deadline.ts limitWaitMs)
// and what the line's pace for the call's class says, (ahead + 1) × the time a call of that
// class takes to pass one place in that line.
//
// Why a pace per class, measured on the calls' own places: a call does not wait for the
// calls ahead of it at arrival only. Calls of a higher class that join later go ahead of it
// in its key's line (priority/classes.ts bandOf), the capacity line serves other keys' calls
// of a higher class first and a party further below its fair share before it
// (capacity-line.ts), and calls ahead of it leave at their own deadlines. Counting the line
// ahead at arrival and a per-call service time predicted a default call's wait 4.3× too
// short in the issue-39 mix (bench/admission-mix.ts; bench/results.md). Instead, each call
// that ends its wait reports how many places it passed (ahead when it joined, less ahead
// when its wait ended, plus its own; the store's counts, so a later call that went ahead of
// it on any instance counts against it) and how long that took, and the line keeps a running
// average of both per class. The net of overtakers, leavers and the capacity behind the line
// is in that pace, as this class sees it now. A call that timed out or left is a sample too
// (its own place counted as passed when it stopped: a bound, the pace was slower): the calls
// that waited longest are the ones the pace must not leave out. A call overtaken as fast as
// the line moved counts as one place in all the time it waited, so its class is predicted a
// wait of that much per place, and refused at once rather than held until its deadline. While
// calls wait, the oldest of each class bounds the pace from below (wait-so-far ÷ the places
// it could have passed), so a line that slows down, or forms faster than its first calls come
// back to teach it, is seen at once.
//
// Held against the deadline is not the expected wait but a likely one: LIKELY_Z spreads
// above it, the spread of a place's time learned from how the calls' paces differ (it adds
// up over places as in a sum of independent times), so about nine calls in ten let wait
// finish within their deadline.
//
// A class whose calls are all refused teaches nothing more; once its pace is older than
// PROBE_AFTER_MS, one call is let wait on the limits' prediction alone, and what it teaches
// replaces the old pace (a line that calmed down is not refused forever on what it was).
// Per gateway, forgotten least recently used first.
import type { AdmissionRequest, RateLimitHeaders } from '../limits/port.ts'
import { limitWaitMs } from './deadline.ts'

/** How a call's wait ended, in places of its key's line (the store's counts). */
export interface WaitSample {
  /** Calls ahead of it when it joined. */
  readonly aheadAtJoin: number
  /** Calls ahead of it when its wait ended: admitted, timed out, left or refused at the head (0 there). */
  readonly aheadAtEnd: number
  readonly waitedMs: number
}

/** A call's predicted wait (ms): what it will most likely wait, and a wait it will likely not pass. */
export interface WaitPrediction {
  /** The expected wait: the refusal's hint, and what tollgate_queue_wait_prediction_ratio measures. */
  readonly waitMs: number
  /** A wait about nine calls in ten finish within (LIKELY_Z spreads above): what the deadline is held against. */
  readonly likelyMs: number
}

export interface WaitPredictor {
  /**
   * The predicted wait of a call of class `band` (priority/classes.ts bandOf) with `ahead`
   * calls before it in `line`, its key's counters at `state`. Infinity: its class passes no
   * place in that line now.
   */
  predict(line: string, band: number, ahead: number, request: AdmissionRequest, state: RateLimitHeaders): WaitPrediction
  /** A call of class `band` in `line`, predicted when it joined, ended its wait. */
  learn(line: string, band: number, sample: WaitSample): void
  /**
   * A call of class `band` with `ahead` before it in `line` is let wait on its prediction
   * (for at most `deadlineMs`; one that never said it ended is forgotten after that):
   * while it waits it tells the calls that join after it how slow the line is at least; end()
   * when its wait ends, with how many were still ahead of it (none given: it teaches nothing,
   * as when the gateway shuts down).
   */
  waiting(line: string, band: number, ahead: number, deadlineMs: number): { end(aheadAtEnd?: number): void }
}

/** Paces remembered at most (the least recently learned go first). */
const MAX_PACES = 10_000
/** The weight of a new sample in a pace's averages. */
const ALPHA = 0.3
/** A pace no call of its class taught for this long gets one call let wait to learn it again. */
export const PROBE_AFTER_MS = 10_000
/** Standard deviations above the expected wait that about nine calls in ten stay within (a normal's 90th percentile). */
const LIKELY_Z = 1.28

interface Pace {
  /** Running averages, over the calls that ended their wait, of the time waited and the places passed. */
  waitedMs: number
  passed: number
  /**
   * The variance of the time to pass one place (ms²), as the calls' own paces spread around
   * the average (a call that passed k places weighs k times). Starts at the average squared:
   * places passed as irregularly as in a line of random arrivals.
   */
  variance: number
  /** When a call last taught it, and when a call was last let wait to teach it again (epoch ms). */
  learnedAt: number
  probedAt: number
}

/** A call let wait on its prediction: `ahead` of it when it joined, at `joinedAt`, until `until` at most (epoch ms). */
interface Waiting {
  readonly joinedAt: number
  readonly ahead: number
  readonly until: number
}

/** `windowMs`: the limiter's window (limits.windowMs). */
export function createWaitPredictor(windowMs = 60_000, now: () => number = Date.now): WaitPredictor {
  const paces = new Map<string, Pace>()
  /** Calls of each pace waiting now, oldest first. */
  const waiters = new Map<string, Set<Waiting>>()
  const keyOf = (line: string, band: number): string => `${band}\n${line}`

  /**
   * The time a call of `key` takes to pass a place, and its variance: the learned pace, or
   * slower when the oldest call of that class still waiting has already waited longer than
   * that for each place it could have passed (a line that slowed down, or one that formed
   * faster than its first calls came back to teach it). Null: nothing known (or so old one
   * call should go and see).
   */
  function perPlaceOf(key: string): { ms: number; variance: number } | null {
    const at = now()
    const pace = paces.get(key)
    const waiting = waiters.get(key)
    let oldest = waiting?.values().next().value
    // Past its deadline it has stopped waiting, whether or not it said so.
    while (waiting !== undefined && oldest !== undefined && oldest.until < at) {
      waiting.delete(oldest)
      oldest = waiting.values().next().value
    }
    if (waiting?.size === 0) waiters.delete(key)
    const atLeast = oldest === undefined ? 0 : (at - oldest.joinedAt) / (oldest.ahead + 1)
    if (pace === undefined) return atLeast > 0 ? { ms: atLeast, variance: atLeast * atLeast } : null
    // Nothing of this class waits and its pace is old: one call goes and sees, on the limits alone.
    if (oldest === undefined && at - pace.learnedAt > PROBE_AFTER_MS && at - pace.probedAt > PROBE_AFTER_MS) {
      pace.probedAt = at
      return null
    }
    return { ms: Math.max(pace.waitedMs / pace.passed, atLeast), variance: pace.variance }
  }

  function learn(line: string, band: number, sample: WaitSample): void {
    const key = keyOf(line, band)
    // Overtaken as fast as the line moved: counted as one place in all that time, not as none.
    const passed = Math.max(1, sample.aheadAtJoin - sample.aheadAtEnd + 1)
    const at = now()
    // A pace older than PROBE_AFTER_MS is not averaged in: the line it measured is gone.
    const before = paces.get(key)
    paces.delete(key)
    let pace: Pace
    if (before === undefined || at - before.learnedAt > PROBE_AFTER_MS) {
      const perPlace = sample.waitedMs / passed
      pace = { waitedMs: sample.waitedMs, passed, variance: perPlace * perPlace, learnedAt: 0, probedAt: 0 }
    } else {
      const spread = passed * (sample.waitedMs / passed - before.waitedMs / before.passed) ** 2
      pace = {
        ...before,
        waitedMs: before.waitedMs + ALPHA * (sample.waitedMs - before.waitedMs),
        passed: before.passed + ALPHA * (passed - before.passed),
        variance: before.variance + ALPHA * (spread - before.variance),
      }
    }
    pace.learnedAt = at
    paces.set(key, pace)
    if (paces.size > MAX_PACES) paces.delete(paces.keys().next().value as string)
  }

  return {
    predict(line, band, ahead, request, state) {
      const limits = limitWaitMs(state, ahead, request, windowMs)
      const perPlace = perPlaceOf(keyOf(line, band))
      const places = ahead + 1
      const waitMs = perPlace === null ? 0 : places * perPlace.ms
      // The places' times add up: their spread grows as the square root of their number.
      const likelyMs = perPlace === null ? 0 : waitMs + LIKELY_Z * Math.sqrt(places * perPlace.variance)
      return { waitMs: Math.round(Math.max(limits, waitMs)), likelyMs: Math.round(Math.max(limits, likelyMs)) }
    },
    learn,
    waiting(line, band, ahead, deadlineMs) {
      const key = keyOf(line, band)
      const joinedAt = now()
      const me: Waiting = { joinedAt, ahead, until: joinedAt + deadlineMs }
      const set = waiters.get(key) ?? waiters.set(key, new Set()).get(key)!
      set.add(me)
      let ended = false
      return {
        end(aheadAtEnd) {
          if (ended) return
          ended = true
          set.delete(me)
          if (set.size === 0 && waiters.get(key) === set) waiters.delete(key)
          if (aheadAtEnd !== undefined)
            learn(line, band, { aheadAtJoin: ahead, aheadAtEnd, waitedMs: now() - me.joinedAt })
        },
      }
    },
  }
}
