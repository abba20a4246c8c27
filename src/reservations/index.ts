// Learned output reservations (learned.ts) as main.ts builds them, and the limiter that
// applies them: a call that names no output cap is admitted on the token-rate limits with
// its learned reservation (port.ts rateEstimate) and, once settled, teaches the sketches
// what it produced.
import type { Config, PlansConfig } from '../config/schema.ts'
import type { Admission, AdmissionRequest, Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { createLearnedReservations, settingsOf, type Learned, type LearnedReservations } from './learned.ts'
import { memorySketchStore, redisSketchStore } from './store.ts'

export { createLearnedReservations, RESERVATION_DEFAULTS, settingsOf } from './learned.ts'
export type { OutputReservationView, ReservationSubject } from './view.ts'

/** On the gateway's Redis when there is one (shared by every instance), in this process otherwise. */
export function createOutputReservationsFromConfig(
  config: Pick<Config, 'store'>,
  redis: RedisConnection | undefined,
  log: Logger,
): LearnedReservations {
  const store = redis === undefined ? memorySketchStore() : redisSketchStore(redis, config.store.keyPrefix)
  return createLearnedReservations({ store, log })
}

const SOURCE_SAID = {
  key: "this key's calls to the model",
  tier: "this tier's calls to the model",
  model: 'calls to the model',
} as const

function learnedRequest(
  request: AdmissionRequest,
  learned: Learned,
  quantile: number,
  replies: number,
): AdmissionRequest {
  const fixed = request.estimate.outputTokens
  const outputTokens = Math.min(fixed, learned.perReply * replies)
  if (outputTokens >= fixed) return request
  const percentile = Math.round(quantile * 1000) / 10
  return {
    ...request,
    rateEstimate: { ...request.estimate, outputTokens },
    reservationNote:
      `This request sets no max_tokens, so it reserved ${outputTokens} output tokens against the rate limits ` +
      `(the ${percentile}th percentile of what ${SOURCE_SAID[learned.source]} produced, or the mean length of such calls in flight when higher: ${learned.perReply} per reply): ` +
      'set max_tokens (or max_completion_tokens, max_output_tokens) to what you expect and it reserves only that; unused tokens are given back when the call ends.',
  }
}

/**
 * The limiter with learned output reservations, for the tiers whose outputReservation is
 * `learned` (the default). Everything but admit, check, asReserved and outputReservation is
 * the limiter's own.
 */
export function withLearnedReservations(
  limiter: Limiter,
  reservations: LearnedReservations,
  plans: () => PlansConfig,
  metrics?: Pick<Metrics, 'outputReservation'>,
): Limiter {
  async function prepared(request: AdmissionRequest, admitting = false): Promise<AdmissionRequest> {
    const uncapped = request.uncapped
    if (uncapped === undefined || request.estimate.outputTokens === 0) return request
    const settings = settingsOf(plans().tiers[request.tier]?.outputReservation)
    const learned = await reservations.lookup(request, settings)
    const made = learned === undefined ? request : learnedRequest(request, learned, settings.quantile, uncapped.replies)
    if (admitting) {
      const reserved = (made.rateEstimate ?? made.estimate).outputTokens / Math.max(uncapped.replies, 1)
      metrics?.outputReservation.observe(
        { source: made === request ? 'fixed' : (learned?.source ?? 'fixed') },
        reserved,
      )
    }
    return made
  }

  async function admitUncapped(
    request: AdmissionRequest,
    uncapped: NonNullable<AdmissionRequest['uncapped']>,
  ): Promise<Admission> {
    const admission = await limiter.admit(await prepared(request, true))
    const settings = settingsOf(plans().tiers[request.tier]?.outputReservation)
    if (settings.mode !== 'learned') return admission
    let settled = false
    const observed: Admission = {
      headers: admission.headers,
      async settle(usage, how) {
        if (settled) return
        settled = true
        // A call no upstream served, or one that reported no output, says nothing about lengths.
        if (how?.withdrawn !== true && usage.outputTokens > 0) {
          reservations.observe(request, settings, usage.outputTokens / Math.max(uncapped.replies, 1))
        }
        await admission.settle(usage, how)
      },
    }
    return observed
  }

  const check = limiter.check?.bind(limiter)
  return {
    ...limiter,
    admit(request) {
      // A call with an output cap reserves it: nothing to look up, nothing to observe.
      return request.uncapped === undefined ? limiter.admit(request) : admitUncapped(request, request.uncapped)
    },
    ...(check === undefined ? {} : { check: async (request: AdmissionRequest) => check(await prepared(request)) }),
    asReserved: (request) => prepared(request),
    async outputReservation(subject) {
      return reservations.describe(subject, plans().tiers[subject.tier])
    },
  }
}
