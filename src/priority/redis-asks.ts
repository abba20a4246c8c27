// Whether a key's interactive calls asked for room lately, as every instance sees it: what
// batch-room.ts asks before it lets a batch line take the whole of a limit, so a line run
// on one instance keeps to flex's share while the key's calls are served on another.
//
// One key per (key, model) on its owner's slot, beside the limiter's counters, set with a
// time to live of a window and a quarter. An instance writes it at most every quarter
// window per pair (a fire-and-forget SET, nothing on the interactive call's path waits for
// it), so it lasts at least a window after the last ask. A batch line reads it (EXISTS)
// only when its own instance saw no ask, and the answer serves the pair's lines for an
// eighth of a window (a batch's lines come one after another: one read each would add a
// round trip to every line); a Redis that does not answer counts as an ask: the share
// holds, the safe side.
import type { RedisConnection } from '../store/redis-client.ts'
import { identityNamespace, type Identity } from '../store/redis-kit.ts'

export interface AskBoard {
  /** A call of (who, model) other than a batch line asked the limiter. */
  note(who: Identity, model: string): void
  /** Whether any instance noted one within the last window (true when it cannot tell). */
  asked(who: Identity, model: string): Promise<boolean>
}

/** Pairs written more than this many: those not written for a window are forgotten. */
const SWEEP_AT = 10_000

export function redisAskBoard(
  redis: RedisConnection,
  prefix: string,
  windowMs: number,
  now: () => number = Date.now,
): AskBoard {
  /** When this instance last wrote each pair's key. */
  const written = new Map<string, number>()
  /** What the store last answered for each pair, and when. */
  const answers = new Map<string, { readonly asked: boolean; readonly at: number }>()
  const keyOf = (who: Identity, model: string): string =>
    `${identityNamespace(prefix, who)}br:${encodeURIComponent(model)}`
  return {
    note(who, model) {
      const key = keyOf(who, model)
      const at = now()
      if (at - (written.get(key) ?? Number.NEGATIVE_INFINITY) < windowMs / 4) return
      written.set(key, at)
      if (written.size > SWEEP_AT) for (const [k, w] of written) if (at - w >= windowMs) written.delete(k)
      // Not written: the next ask tries again.
      redis.set(key, '1', 'PX', Math.ceil(windowMs * 1.25)).catch(() => written.delete(key))
    },
    async asked(who, model) {
      const key = keyOf(who, model)
      const at = now()
      const known = answers.get(key)
      if (known !== undefined && at - known.at < windowMs / 8) return known.asked
      let asked = true
      try {
        asked = (await redis.exists(key)) === 1
      } catch {
        // unsure: asked
      }
      answers.set(key, { asked, at })
      if (answers.size > SWEEP_AT) for (const [k, a] of answers) if (at - a.at >= windowMs) answers.delete(k)
      return asked
    },
  }
}
