// A key's plan per model, and where it stands in the current window: read through the
// limiter's peek, the very counters and the very x-ratelimit-* headers a call would get.
import type { Config, ModelLimits } from '../config/schema.ts'
import type { KeyRecord } from '../keys/record.ts'
import { dimensionsOf } from '../limits/dimensions.ts'
import { rateLimitHeaders } from '../limits/headers.ts'
import { resolveLimits } from '../limits/plans.ts'
import type { BudgetStatus, Limiter, RateLimitHeaders } from '../limits/port.ts'
import type { OutputReservationView } from '../reservations/view.ts'
import { principalOf } from '../keys/record.ts'
import { tierOf } from '../limits/plans.ts'

export const DIMENSIONS = [
  { suffix: 'requests', label: 'Requests' },
  { suffix: 'tokens', label: 'Tokens' },
  { suffix: 'input-tokens', label: 'Input tokens' },
  { suffix: 'output-tokens', label: 'Output tokens' },
] as const

export interface WindowState {
  readonly limit: string
  readonly remaining: string | null
  readonly reset: string | null
}

export interface ModelStanding {
  readonly model: string
  readonly tier: string
  readonly limits: ModelLimits
  /** By header suffix; absent where the plan sets no such limit. */
  readonly windows: Readonly<Partial<Record<(typeof DIMENSIONS)[number]['suffix'], WindowState>>>
  /** What a call naming no output cap reserves now on the token limits (reservations/); absent: not known. */
  readonly reservation?: OutputReservationView
}

function windowsOf(headers: RateLimitHeaders): ModelStanding['windows'] {
  const out: Partial<Record<(typeof DIMENSIONS)[number]['suffix'], WindowState>> = {}
  for (const { suffix } of DIMENSIONS) {
    const limit = headers[`x-ratelimit-limit-${suffix}`]
    if (limit === undefined) continue
    out[suffix] = {
      limit,
      remaining: headers[`x-ratelimit-remaining-${suffix}`] ?? null,
      reset: headers[`x-ratelimit-reset-${suffix}`] ?? null,
    }
  }
  return out
}

/**
 * One row per model the key may call; a limiter that cannot answer shows the limits alone.
 * Not live (a revoked or expired key, which no call gets through with): the limits alone
 * too, without asking the limiter: what is "left" of a window it can never use would read
 * as if the key still worked.
 */
export async function keyStanding(
  config: Pick<Config, 'plans' | 'models'>,
  limiter: Limiter,
  key: KeyRecord,
  options: { live: boolean },
): Promise<ModelStanding[]> {
  const models = key.models ?? config.models.map((m) => m.name)
  return Promise.all(
    models.map(async (model) => {
      const { tier, limits } = resolveLimits(config.plans, key, model)
      const headers = options.live
        ? await limiter
            .peek({ keyId: key.id, owner: key.owner ?? key.id, tier, model, limits })
            .catch(() => rateLimitHeaders(dimensionsOf(limits)))
        : rateLimitHeaders(dimensionsOf(limits))
      const subject = { keyId: key.id, owner: key.owner ?? key.id, tier, model }
      const reservation =
        options.live && limiter.outputReservation !== undefined
          ? await limiter.outputReservation(subject).catch(() => undefined)
          : undefined
      return { model, tier, limits, windows: windowsOf(headers), ...(reservation === undefined ? {} : { reservation }) }
    }),
  )
}

/**
 * The budgets these keys' calls are charged against, each once (an owner's budget is every
 * key's of that owner). A limiter that cannot answer (Redis away) shows none rather than
 * failing the page.
 */
export async function budgetsOf(
  deps: { readonly config: Pick<Config, 'plans'>; readonly limiter: Limiter },
  keys: readonly KeyRecord[],
): Promise<BudgetStatus[]> {
  const { limiter, config } = deps
  if (limiter.budgetStatus === undefined) return []
  const seen = new Map<string, BudgetStatus>()
  for (const key of keys) {
    const p = principalOf(key)
    const statuses = await limiter
      .budgetStatus({ keyId: p.keyId, owner: p.owner, tier: tierOf(key, config.plans) })
      .catch(() => [])
    for (const s of statuses) seen.set(`${s.scope}\u0000${s.id}`, s)
  }
  return [...seen.values()]
}
