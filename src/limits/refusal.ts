// The 429 a refused admission answers, in OpenAI's words: which model, which limit, what
// was used and requested, and how long to wait. A call that can never fit and a spent
// quota say so, and carry x-should-retry: false so SDKs don't retry them.
import { gatewayError, type GatewayError } from '../errors.ts'
import type { Charge, CounterState, DimensionName } from './dimensions.ts'
import { fits } from './dimensions.ts'
import { formatDuration } from './duration.ts'
import type { RateLimitHeaders } from './port.ts'
import type { BudgetSpec } from '../budgets/port.ts'
import { zonedIso, type BudgetPeriod } from '../budgets/period.ts'
import { formatMoney, toUnits } from '../keys/money.ts'
import { budgetExhausted, type BudgetCharge, type BudgetState } from './budget-charges.ts'

export type RefusalReason = DimensionName | 'too_large'

export interface Refusal {
  readonly reason: RefusalReason
  readonly error: GatewayError
}

const WHAT: Readonly<Record<DimensionName, readonly [string, string]>> = {
  requests: ['requests', 'RPM'],
  tokens: ['tokens', 'TPM'],
  input_tokens: ['input tokens', 'TPM'],
  output_tokens: ['output tokens', 'TPM'],
  quota: ['tokens', 'quota'],
}

function per(windowMs: number): string {
  return windowMs === 60_000 ? 'min' : formatDuration(windowMs)
}

function label(name: DimensionName, windowMs: number): string {
  const [what, short] = WHAT[name]
  return `${what} per ${per(windowMs)} (${short})`
}

function subjectName(model: string): string {
  return model === '*' ? 'endpoints without a model' : model
}

/** Why these charges were refused on these counters (states as found, nothing consumed). */
export function refusalOf(
  model: string,
  charges: readonly Charge[],
  states: readonly CounterState[],
  windowMs: number,
  headers: RateLimitHeaders,
  reservationNote?: string,
): Refusal {
  const note = (name: DimensionName): string =>
    name === 'requests' || reservationNote === undefined ? '' : ` ${reservationNote}`
  const refused = charges
    .map((c, i) => ({ c, s: states[i] ?? { used: 0, resetMs: 0, expiresAt: 0 } }))
    .filter(({ c, s }) => !fits(c, s.used))
  const noRetry = { ...headers, 'x-should-retry': 'false' }

  const quota = refused.find(({ c }) => c.name === 'quota')
  if (quota) {
    return {
      reason: 'quota',
      error: gatewayError('insufficient_quota', {
        message: `You exceeded your token quota for ${subjectName(model)}: Quota ${quota.c.limit} tokens, Used ${quota.s.used}. Ask for a larger quota to continue.${note('quota')}`,
        headers: noRetry,
      }),
    }
  }

  const tooLarge = refused.find(({ c }) => c.cost > c.limit)
  if (tooLarge) {
    return {
      reason: 'too_large',
      error: gatewayError(tooLarge.c.name === 'requests' ? 'rate_limit_requests' : 'rate_limit_tokens', {
        message:
          `Request too large for ${subjectName(model)} on ${label(tooLarge.c.name, windowMs)}: Limit ${tooLarge.c.limit}, Requested ${tooLarge.c.cost}. ` +
          `This request can never fit within the limit; reduce the prompt or max_tokens (max_completion_tokens) and send it again.${note(tooLarge.c.name)}`,
        headers: noRetry,
      }),
    }
  }

  // The client has to wait for every refusing counter; name the one that frees last.
  let worst = refused[0]
  for (const r of refused) if (worst === undefined || r.s.resetMs > worst.s.resetMs) worst = r
  const { c, s } = worst ?? { c: charges[0], s: states[0] }
  const name = c?.name ?? 'requests'
  const waitMs = Math.max(1, Math.ceil(s?.resetMs ?? 0))
  return {
    reason: name,
    error: gatewayError(name === 'requests' ? 'rate_limit_requests' : 'rate_limit_tokens', {
      message:
        `Rate limit reached for ${subjectName(model)} on ${label(name, windowMs)}: Limit ${c?.limit ?? 0}, Used ${s?.used ?? 0}, Requested ${c?.cost ?? 0}. ` +
        `Please try again in ${formatDuration(waitMs)}.${note(name)}`,
      headers: { ...headers, 'retry-after': String(Math.ceil(waitMs / 1000)), 'retry-after-ms': String(waitMs) },
    }),
  }
}

const PERIOD_WORD: Readonly<Record<BudgetPeriod, string>> = {
  day: 'daily',
  week: 'weekly',
  month: 'monthly',
  lifetime: 'lifetime',
}

/** "the monthly budget of owner u_1 (50.00 EUR per month, Europe/Berlin)". */
export function budgetName(spec: BudgetSpec, currency: string): string {
  const per = spec.period === 'lifetime' ? 'in all' : `per ${spec.period}, ${spec.timeZone}`
  return `the ${PERIOD_WORD[spec.period]} budget of ${spec.scope} ${spec.id} (${formatMoney(toUnits(spec.amountNanos), currency)} ${per})`
}

/**
 * The 429 of a budget that has no room for the call: exhausted (spent, no retry; resets at
 * the period's end), or held by calls in flight (retry in a second, when they settle).
 */
export function budgetRefusalOf(
  charge: BudgetCharge,
  state: BudgetState,
  currency: string,
  now: number,
  headers: RateLimitHeaders,
): GatewayError {
  const money = (nanos: number): string => formatMoney(toUnits(nanos), currency)
  const left = Math.max(charge.spec.amountNanos - state.spent - state.held, 0)
  const what =
    `You exceeded ${budgetName(charge.spec, currency)}: ${money(state.spent)} spent` +
    (state.held > 0 ? `, ${money(state.held)} held by calls in flight` : '') +
    `, ${money(left)} left; this request is estimated at ${money(charge.cost)}.`
  if (budgetExhausted(charge, state)) {
    const end = charge.span.end
    const resets = Number.isFinite(end)
      ? ` It resets at ${zonedIso(end, charge.spec.timeZone)} (in ${formatDuration(wholeSeconds(end - now))}).`
      : ' A lifetime budget does not reset: ask an administrator to raise it.'
    return gatewayError('budget_exhausted', {
      message: `${what}${resets}`,
      headers: { ...headers, 'x-should-retry': 'false' },
    })
  }
  return gatewayError('budget_reserved', {
    message: `${what} Calls in flight give back what they do not use when they end; please try again in 1s.`,
    headers: { ...headers, 'retry-after': '1', 'retry-after-ms': '1000' },
  })
}

/** A wait a person reads, in whole seconds (rounded up, at least one): a reset hours away needs no milliseconds. */
function wholeSeconds(ms: number): number {
  return Math.max(Math.ceil(ms / 1000), 1) * 1000
}
