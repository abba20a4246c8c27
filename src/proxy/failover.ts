// Choosing a deployment and moving on to the next when one cannot serve. A request moves
// on only when the upstream surely did not act on it: it could not be reached, or it
// answered 5xx before sending any body. A 4xx is the client's answer; a timeout after the
// request was sent is final, because the upstream may still be working on it. (The
// corridor walks deployment-pick.ts, which adds the deployments' capacity to this: an
// upstream 429, or a 503, is a refusal there that moves on too.)
//
// When every deployment fails: if any of them answered 5xx, the client gets the last
// such answer (the upstream's own error body, usually OpenAI-shaped); otherwise the last
// error is thrown (upstream_unreachable, 502).
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../backends/port.ts'
import { GatewayError, toGatewayError } from '../errors.ts'
import type { CircuitBreaker } from './circuit-breaker.ts'

export interface FailoverTarget {
  readonly adapter: BackendAdapter
  /** The model name this deployment's upstream knows, or null for endpoints without one. */
  readonly upstreamModel: string | null
  readonly weight: number
  readonly deploymentIndex: number
}

export interface FailoverOptions<T extends FailoverTarget = FailoverTarget> {
  /**
   * Told of each failed attempt, for logs and metrics: `next` is the deployment tried next,
   * or undefined when this failure is final (no deployment left, the client is gone, or the
   * upstream may have acted on it). Only an attempt with a `next` is a failover.
   */
  onAttemptFailed?(target: T, failure: GatewayError | number, next: T | undefined): void
  /** Sends deployments that keep failing to connect to the back of the line for a while. */
  readonly breaker?: CircuitBreaker
}

export interface FailoverResult<T extends FailoverTarget = FailoverTarget> {
  readonly response: UpstreamResponse
  readonly target: T
  readonly attempts: number
}

/**
 * The order to try `targets` in. The first is picked by weighted round robin on `counter`
 * (a number the caller increments per request), so over many requests each target leads
 * in proportion to its weight; the others follow in their configured order as fallbacks.
 */
export function pickOrder<T extends { readonly weight: number }>(targets: readonly T[], counter: number): T[] {
  const total = targets.reduce((sum, t) => sum + Math.max(0, t.weight), 0)
  if (targets.length <= 1 || total <= 0) return [...targets]
  let slot = ((Math.floor(counter) % total) + total) % total
  let first = 0
  for (; first < targets.length; first++) {
    const weight = Math.max(0, targets[first]?.weight ?? 0)
    if (slot < weight) break
    slot -= weight
  }
  return [...targets.slice(first), ...targets.slice(0, first)]
}

export function breakerKey(target: FailoverTarget): string {
  return target.adapter.name
}

/** Deployments with an open circuit go last: still tried, rather than failing outright. */
export function healthyFirst<T extends FailoverTarget>(
  targets: readonly T[],
  breaker: CircuitBreaker | undefined,
): T[] {
  if (breaker === undefined) return [...targets]
  const open = (t: T): boolean => breaker.isOpen(breakerKey(t))
  return [...targets.filter((t) => !open(t)), ...targets.filter(open)]
}

export type SentOnce =
  | { readonly ok: true; readonly response: UpstreamResponse }
  /** `final`: nobody is waiting any more, or the upstream may have acted on it (not a connection failure). */
  | { readonly ok: false; readonly error: GatewayError; readonly final: boolean }

/** One try at one deployment; the breaker learns whether it could be reached. */
export async function sendOnce(
  target: FailoverTarget,
  request: UpstreamRequest,
  breaker: CircuitBreaker | undefined,
): Promise<SentOnce> {
  try {
    const response = await target.adapter.send(request)
    breaker?.recordSuccess(breakerKey(target))
    return { ok: true, response }
  } catch (err) {
    const error = toGatewayError(err)
    if (error.errorName === 'upstream_unreachable') breaker?.recordFailure(breakerKey(target))
    return { ok: false, error, final: request.signal.aborted || error.errorName !== 'upstream_unreachable' }
  }
}

/** Tries `targets` in the given order (see pickOrder) until one serves. */
export async function sendWithFailover<T extends FailoverTarget>(
  targets: readonly T[],
  build: (target: T) => UpstreamRequest,
  options: FailoverOptions<T> = {},
): Promise<FailoverResult<T>> {
  const order = healthyFirst(targets, options.breaker)
  let lastError: GatewayError | undefined
  let last5xx: FailoverResult<T> | undefined
  let attempts = 0
  for (const [index, target] of order.entries()) {
    const following = order[index + 1]
    const request = build(target)
    attempts += 1
    const sent = await sendOnce(target, request, options.breaker)
    if (!sent.ok) {
      const { error, final } = sent
      options.onAttemptFailed?.(target, error, final ? undefined : following)
      if (final) {
        discard(last5xx)
        throw error
      }
      lastError = error
      continue
    }
    const response = sent.response
    if (response.status < 500) {
      discard(last5xx)
      return { response, target, attempts }
    }
    options.onAttemptFailed?.(target, response.status, request.signal.aborted ? undefined : following)
    discard(last5xx)
    last5xx = { response, target, attempts }
    if (request.signal.aborted) break
  }
  if (last5xx !== undefined) return { ...last5xx, attempts }
  throw (
    lastError ?? new GatewayError('upstream_unreachable', { message: 'No deployment is configured for this model.' })
  )
}

/** An unread body holds its socket; destroying it hands the socket back. */
export function discard(result: FailoverResult | undefined): void {
  result?.response.body.destroy()
}
