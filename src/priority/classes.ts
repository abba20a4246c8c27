// Priority classes: OpenAI's `service_tier` (priority, default, flex) as the gateway's own.
// A call's class is resolved in intake: the body's `service_tier`, else (absent, null or
// 'auto') the key's default class when its tier allows it, else the tier's; 'fast' is OpenAI's other name for priority. A class the
// tier does not allow is refused with 400 before anything is admitted. The class then
// shapes the call in two ways only, both on the limits it carries (so the hold, the
// settlement, the stream journal and the x-ratelimit-* headers all follow without knowing
// about classes):
//  - its price: the plan's input and output prices times the class's multiplier, exact to
//    the micro-unit per million tokens (the precision money.ts reads prices at), so every
//    cost stays an integer of nano-units;
//  - a flex call is admitted against flexShare of each rate limit (rpm, tpm, input_tpm,
//    output_tpm; never the quota): the rest of a limit is kept for default and priority
//    calls, so flex is the first refused (/v2) or the one that waits (/queue) as a key
//    fills up, and a key that is not near its limits runs every class at once.
// On /queue, a key's line orders priority before default before flex, first come first
// served within a class (bandOf; both stores, so across instances on Redis), and so does
// the capacity line of calls waiting for a deployment (queue/capacity-line.ts). A
// deployment's declared capacity is shared the same way (capacityShare).
// The reply says which class served it (its `service_tier`, proxy/public-model.ts).
// docs/limits.md, "Priority classes".
import {
  SERVICE_CLASSES,
  type ModelLimits,
  type PlansConfig,
  type ServiceClass,
  type ServiceTiersConfig,
  type TierBatchesConfig,
} from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import type { JsonObject } from '../json.ts'
import type { KeyRecord } from '../keys/record.ts'
import { MULTIPLIER_SCALE } from '../keys/cache-prices.ts'
import { halfUp } from '../keys/money.ts'
import type { ResolvedLimits } from '../limits/plans.ts'

export type { ServiceClass } from '../config/schema.ts'

/** The documented defaults of a tier that says nothing. */
export const DEFAULT_PRICES: Readonly<Record<ServiceClass, number>> = { priority: 2, default: 1, flex: 0.5 }
export const DEFAULT_FLEX_SHARE = 0.8

/** Names OpenAI accepts for a class, beyond the classes' own. */
const ALIASES: Readonly<Record<string, ServiceClass>> = { fast: 'priority' }

/** The endpoints whose body may name a class (OpenAI's service_tier). */
const NAMED_IN = new Set(['chat.completions', 'responses'])

/**
 * The class of a call to `endpoint` with `body` on a tier with `settings` (a call that names
 * none: the key's default when the tier allows it, else the tier's): throws 400
 * (invalid_body, param service_tier) for a class the gateway does not offer or the tier
 * does not allow.
 */
export function resolveClass(
  endpoint: string,
  body: JsonObject | null,
  settings: ServiceTiersConfig | undefined,
  keyDefault?: ServiceClass | null,
): ServiceClass {
  const allowed = settings?.allow ?? SERVICE_CLASSES
  // The key's own default, when its tier allows it (a tier changed since is not an error).
  const fallback = keyDefault != null && allowed.includes(keyDefault) ? keyDefault : (settings?.default ?? 'default')
  const asked = body !== null && NAMED_IN.has(endpoint) ? body.service_tier : undefined
  if (asked === undefined || asked === null || asked === 'auto') return fallback
  const named =
    typeof asked === 'string'
      ? (SERVICE_CLASSES as readonly string[]).includes(asked)
        ? (asked as ServiceClass)
        : ALIASES[asked]
      : undefined
  if (named === undefined) {
    throw gatewayError('invalid_body', {
      message: `service_tier must be one of 'auto', 'default', 'flex', 'priority' (or 'fast'); this gateway offers no other.`,
      param: 'service_tier',
    })
  }
  if (!allowed.includes(named)) {
    throw gatewayError('invalid_body', {
      message: `This API key's tier may not use service_tier '${named}'; it may use ${allowed.map((c) => `'${c}'`).join(', ')} (or 'auto': '${fallback}').`,
      param: 'service_tier',
    })
  }
  return named
}

/** A batch line's price multiplier, in ten-thousandths (MULTIPLIER_SCALE): the tier's, default 1. */
export function batchPriceMultiplier(settings: TierBatchesConfig | undefined): number {
  return Math.round((settings?.priceMultiplier ?? 1) * MULTIPLIER_SCALE)
}

/** The class's price multiplier, in ten-thousandths (MULTIPLIER_SCALE). */
export function priceMultiplier(cls: ServiceClass, settings: ServiceTiersConfig | undefined): number {
  return Math.round((settings?.prices?.[cls] ?? DEFAULT_PRICES[cls]) * MULTIPLIER_SCALE)
}

/** A price per million tokens times a multiplier in ten-thousandths, exact to the micro-unit. */
function scaledPrice(price: number | undefined, multiplier: number): number | undefined {
  if (price === undefined) return undefined
  return halfUp(BigInt(Math.round(price * 1e6)) * BigInt(multiplier), BigInt(MULTIPLIER_SCALE)) / 1e6
}

const SHARED_LIMITS = ['rpm', 'tpm', 'input_tpm', 'output_tpm'] as const

/** The limits a call of `cls` is admitted and charged on (see the opening comment). */
export function classLimits(
  resolved: ResolvedLimits,
  cls: ServiceClass,
  settings: ServiceTiersConfig | undefined,
  multiplier = priceMultiplier(cls, settings),
): ResolvedLimits {
  if (multiplier === MULTIPLIER_SCALE && cls !== 'flex') return resolved // the plan's own, as most calls are
  const limits: { -readonly [K in keyof ModelLimits]: ModelLimits[K] } = { ...resolved.limits }
  if (multiplier !== MULTIPLIER_SCALE) {
    const input = scaledPrice(limits.input_price, multiplier)
    const output = scaledPrice(limits.output_price, multiplier)
    if (input !== undefined) limits.input_price = input
    if (output !== undefined) limits.output_price = output
  }
  if (cls === 'flex') {
    const share = settings?.flexShare ?? DEFAULT_FLEX_SHARE
    for (const name of SHARED_LIMITS) {
      const limit = limits[name]
      if (limit !== undefined) limits[name] = Math.max(1, Math.floor(limit * share))
    }
  }
  return { ...resolved, limits }
}

/**
 * The share of a deployment's declared capacity (rpm, tpm, maxConcurrent) a call of `cls` may
 * fill: flex its tier's flexShare, as on the key's limits, every other class all of it. So
 * under a deployment's contention flex is shed first (/v2: 429 flex_capacity) or waits
 * (/queue), and a deployment with room runs every class at once.
 */
export function capacityShare(plans: PlansConfig, tier: string, cls: ServiceClass | undefined): number {
  return cls === 'flex' ? (plans.tiers[tier]?.serviceTiers?.flexShare ?? DEFAULT_FLEX_SHARE) : 1
}

/** Where a class waits in its key's line: priority before default before flex, FIFO within one. */
const BAND = 1e15 // beyond any line's sequence, within a double's exact integers (2⁵³ ≈ 9·10¹⁵)
export function bandOf(cls: ServiceClass | undefined): number {
  return cls === 'priority' ? -BAND : cls === 'flex' ? BAND : 0
}

/**
 * A batch's line (src/batches/) runs in the lowest class: it waits behind every interactive
 * call of its key's line, and is shed first from a deployment's capacity (capacityShare). Its
 * key's rate limits it takes in the batch pool (limits/pools.ts): the whole of each limit,
 * less what the key's interactive calls use of the window, which a batch never takes from.
 * It is priced at its tier's batch multiplier, not flex's.
 */
export const BATCH_CLASS: ServiceClass = 'flex'
/** Whether a call's limits are a batch's line's (withClass marked them). */
export const isBatchLine = (resolved: ResolvedLimits): boolean => resolved.batch === true
/** Where a stored request waits in its key's line: a batch's line in the batch class, any other in the default one. */
export const storedBand = (call: { readonly batch?: true }): number => (call.batch === true ? bandOf(BATCH_CLASS) : 0)

/** A call's class and the limits it is admitted and charged on, for its tier (intake, and a stored request restored). */
export function withClass(
  plans: PlansConfig,
  key: Pick<KeyRecord, 'serviceTier'>,
  resolved: ResolvedLimits,
  endpoint: string,
  body: RequestBody,
  batch = false,
): { readonly resolved: ResolvedLimits; readonly serviceClass: ServiceClass } {
  const settings = plans.tiers[resolved.tier]?.serviceTiers
  if (batch) {
    // Whatever its body names: the batch class, at the tier's batch price.
    const multiplier = batchPriceMultiplier(plans.tiers[resolved.tier]?.batches)
    // The whole of each limit, in the batch pool: what interactive calls use of it is not the batch's (limits/pools.ts).
    return {
      resolved: { ...classLimits(resolved, 'default', settings, multiplier), batch: true },
      serviceClass: BATCH_CLASS,
    }
  }
  const serviceClass = resolveClass(endpoint, body.kind === 'json' ? body.value : null, settings, key.serviceTier)
  return { resolved: classLimits(resolved, serviceClass, settings), serviceClass }
}
