// Fair shares as the gateway uses them: every call charges its party's virtual token counter
// in its model's scope (vtc.ts), its estimate when the limiter admits it and the difference
// when it settles (all of it back when no upstream served it), divided by its tier's weight;
// and the queue's capacity line reads the counters to choose who tries next
// (queue/capacity-line.ts). A store that does not answer never refuses or delays a call:
// the charge is lost (logged once per outage) and the line falls back to first come first
// served for that choice. Each flush also brings back where the parties stand
// (contention.ts), which /v2 reads to keep room for the parties below their share
// (capacity-share.ts).
import type { Usage } from '../backends/port.ts'
import type { PlansConfig } from '../config/schema.ts'
import type { Admission, AdmissionRequest, Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import { createOutageLog } from '../observability/outage-log.ts'
import type { LineFairness } from '../queue/capacity-line.ts'
import { createStandings } from './contention.ts'
import type { FairStore } from './store.ts'
import { ACTIVE_MS, partyOf } from './vtc.ts'

export { partyOf }

export const DEFAULT_WEIGHT = 1

/** How long a charge may wait to leave with others of its model. */
const FLUSH_MS = 20

export interface FairShares extends LineFairness {
  /** Charges `tokens` (negative: given back) to the request's party, divided by its tier's weight. */
  charge(request: Pick<AdmissionRequest, 'keyId' | 'owner' | 'tier' | 'model'>, tokens: number): void
  /** Settled charges still on their way to the store (tests wait for them). */
  settled(): Promise<void>
  /**
   * Whether the request's party is above its share in its model now, before a call of
   * `tokens` it was just charged (contention.ts): from the last flush's answer, with no
   * store call. False when nothing recent is known.
   */
  above(request: Pick<AdmissionRequest, 'keyId' | 'owner' | 'tier' | 'model'>, tokens: number): boolean
}

export interface FairSharesDeps {
  readonly store: FairStore
  readonly plans: () => PlansConfig
  readonly log: Logger
  readonly metrics?: Pick<Metrics, 'fairShareTokens' | 'fairShareOvertakes'>
  readonly now?: () => number
  readonly activeMs?: number
}

export const weightOf = (plans: PlansConfig, tier: string): number =>
  plans.tiers[tier]?.fairShare?.weight ?? DEFAULT_WEIGHT

export function createFairShares(deps: FairSharesDeps): FairShares {
  const now = deps.now ?? Date.now
  const activeMs = deps.activeMs ?? ACTIVE_MS
  const outage = createOutageLog('fair shares')
  const failed = (error: unknown): void =>
    outage.failed(deps.log, error instanceof Error ? error : new Error(String(error)))
  const pending = new Set<Promise<unknown>>()
  const standings = createStandings()
  // Charges wait here up to FLUSH_MS and leave as one script per model: every call charges its
  // model's counters twice, and on a cluster a script per charge would put a model's whole
  // traffic on the one master of its slot. A read of the counters sends its model's first.
  const buffered = new Map<string, Map<string, number>>()
  let timer: NodeJS.Timeout | undefined
  const flushScope = (model: string): Promise<unknown> => {
    const charges = buffered.get(model)
    if (charges === undefined) return Promise.resolve()
    buffered.delete(model)
    const done = deps.store
      .chargeMany(model, [...charges], now(), activeMs)
      .then((standing) => standings.saw(model, standing, now()), failed)
    pending.add(done)
    void done.finally(() => pending.delete(done))
    return done
  }
  const flush = (): void => {
    clearTimeout(timer)
    timer = undefined
    for (const model of [...buffered.keys()]) void flushScope(model)
  }
  const send = (model: string, party: string, weighted: number): void => {
    let charges = buffered.get(model)
    if (charges === undefined) buffered.set(model, (charges = new Map()))
    charges.set(party, (charges.get(party) ?? 0) + weighted)
    if (timer === undefined) {
      timer = setTimeout(flush, FLUSH_MS)
      timer.unref()
    }
  }
  return {
    charge(request, tokens) {
      if (tokens === 0 || !Number.isFinite(tokens)) return
      send(request.model, partyOf(request), tokens / weightOf(deps.plans(), request.tier))
    },
    arrived(model, party) {
      send(model, party, 0)
    },
    async counters(model, parties) {
      await flushScope(model)
      try {
        return await deps.store.read(model, parties, now(), activeMs)
      } catch (error) {
        failed(error)
        return undefined
      }
    },
    overtook(model) {
      deps.metrics?.fairShareOvertakes.inc({ model })
    },
    async settled() {
      flush()
      await Promise.all([...pending])
    },
    above(request, tokens) {
      const party = partyOf(request)
      const weighted = tokens / weightOf(deps.plans(), request.tier)
      const unsent = buffered.get(request.model)?.get(party) ?? 0
      return standings.above(request.model, party, unsent - weighted, now())
    },
  }
}

const tokensOf = (usage: Usage): number => usage.inputTokens + usage.outputTokens

/**
 * The limiter with fair-share charges: what it admits is charged at once (so a call in
 * flight already counts against its party's share), and its settlement puts the counter
 * right. Everything else is the limiter's own.
 */
export function withFairShares(
  limiter: Limiter,
  shares: FairShares,
  plans: () => PlansConfig,
  metrics?: Pick<Metrics, 'fairShareTokens'>,
): Limiter {
  return {
    ...limiter,
    async admit(request) {
      const admission = await limiter.admit(request)
      const charged = request.estimate.inputTokens + (request.rateEstimate ?? request.estimate).outputTokens
      shares.charge(request, charged)
      let settled = false
      const charging: Admission = {
        headers: admission.headers,
        async settle(usage, how) {
          if (!settled) {
            settled = true
            const served = how?.withdrawn === true ? 0 : tokensOf(usage)
            shares.charge(request, served - charged)
            if (served > 0) {
              const weight = weightOf(plans(), request.tier)
              metrics?.fairShareTokens.inc({ model: request.model, tier: request.tier }, served / weight)
            }
          }
          await admission.settle(usage, how)
        },
      }
      return charging
    },
  }
}
