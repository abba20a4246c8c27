// The insurance limiter's limits: what one instance enforces in memory while Redis is away,
// and the quota memory that makes it fair (rate-limiter-flexible's insuranceLimiter idea).
//
// During an outage every instance counts on its own, so each enforces its share of the
// windowed limits. A lifetime quota cannot be shared out that way: it starts from the
// last count Redis gave for the (key, model), remembered on every admission and settle
// made on Redis. What was counted against quotas in memory goes to Redis once it is back.
import type { Subject } from './counters.ts'
import type { Adjustment, Charge, Dimension } from './dimensions.ts'
import type { MemoryCounters } from './memory-counters.ts'

/** Last quota counters seen in Redis, for the insurance limiter to start from. */
const QUOTA_MEMORY = 10_000

export interface Insurance {
  /** After an admission on Redis: the quota counter as Redis left it. */
  remember(subject: Subject, charges: readonly Charge[], states: readonly { readonly used: number }[]): void
  /** After a settle on Redis: the remembered quota counter moves by the same amount. */
  settled(subject: Subject, adjustments: readonly Adjustment[]): void
  /** The limits this instance enforces in memory during an outage. */
  share<D extends Dimension>(subject: Subject, dimensions: readonly D[]): D[]
}

/** `instances`: how many instances share the traffic (and so the windowed limits). */
export function createInsurance(instances: number): Insurance {
  const lastQuota = new Map<string, number>()
  const subjectKey = (s: Subject): string => `${s.keyId}\u0000${s.model}`

  return {
    remember(subject, charges, states) {
      const i = charges.findIndex((c) => c.name === 'quota')
      if (i === -1) return
      const key = subjectKey(subject)
      // Deleted first so that the Map's order is least recently used first.
      lastQuota.delete(key)
      lastQuota.set(key, states[i]?.used ?? 0)
      if (lastQuota.size > QUOTA_MEMORY) lastQuota.delete(lastQuota.keys().next().value ?? '')
    },

    settled(subject, adjustments) {
      const quota = adjustments.find((a) => a.name === 'quota')
      const key = subjectKey(subject)
      const known = lastQuota.get(key)
      if (quota && known !== undefined) lastQuota.set(key, Math.max(0, known + quota.delta))
    },

    share(subject, dimensions) {
      return dimensions.map((d) => {
        if (d.windowed) return { ...d, limit: Math.max(1, Math.floor(d.limit / instances)) }
        return { ...d, limit: Math.max(0, d.limit - (lastQuota.get(subjectKey(subject)) ?? 0)) }
      })
    },
  }
}

/** Tokens counted against quotas in memory during the outage go to Redis, one settle each. */
export async function handOverQuota(
  memory: Pick<MemoryCounters, 'drainLifetime'>,
  settle: (subject: Subject, adjustments: readonly Adjustment[]) => Promise<unknown>,
): Promise<void> {
  for (const { subject, name, used } of memory.drainLifetime()) {
    await settle(subject, [{ name, windowed: false, delta: used, reserved: 0, expiresAt: 0 }])
  }
}
