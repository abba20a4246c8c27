// Which deployment a call goes to, given what the deployments can take (issue #22), and
// where it goes next when one cannot serve. failover.ts's rules hold (a deployment that
// cannot be reached, or answers 5xx before any body, hands the call on; any other answer
// is final), and capacity adds two:
//   - Before each try, DeploymentCapacity picks among the deployments not tried yet one
//     with room (weighted by headroom), skipping those cooling down or full. When none of
//     them declares or has taught a limit, it has nothing to say and costs nothing: the
//     configured order stands (weighted round robin, open circuits last; failover.ts).
//   - An upstream 429, or a 503, is a refusal: the upstream did not act. The deployment
//     cools down for as long as it named, and the call moves on. The client never sees a
//     refusal while another deployment has room. When the rest are full or cooling down,
//     it gets the gateway's own 429 (upstream_capacity) with the time the first frees up,
//     and so when every deployment of the model was tried and refused it (a single one
//     included): an upstream's refusal, its body and headers, never reaches the client.
//     (/queue waits for room instead, as it does for any upstream_capacity.)
//   - An upstream 401 or 403 refused the gateway's own credential: the call ends with
//     upstream_auth_failed (502), never the upstream's invalid_api_key, which an SDK would
//     raise as the caller's AuthenticationError.
// The lease of the deployment that answered goes back to the caller, which releases it
// with the call's real usage once the reply is settled.
import { Readable } from 'node:stream'
import type { UpstreamRequest, UpstreamResponse } from '../backends/port.ts'
import { deploymentIdOf } from '../capacity/ids.ts'
import type { CapacityLease, DeploymentCapacity } from '../capacity/port.ts'
import { observeResponse, type UpstreamObservation } from '../capacity/upstream-headers.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { CircuitBreaker } from './circuit-breaker.ts'
import {
  discard,
  healthyFirst,
  pickOrder,
  sendOnce,
  type FailoverOptions,
  type FailoverResult,
  type FailoverTarget,
} from './failover.ts'

/** How much of a refusal's body is kept (to tell its kind, and to answer with it if it is the last). */
const REFUSAL_BODY_BYTES = 64 * 1024
/** A refusal's body that takes longer than this is not waited for. */
const REFUSAL_BODY_MS = 1000

export interface PickOptions<T extends FailoverTarget> extends FailoverOptions<T> {
  readonly capacity: DeploymentCapacity
  readonly metrics: Pick<Metrics, 'upstreamRefusals' | 'deploymentMoves'>
  /** The public model, for the moves counter ('' for model-less calls). */
  readonly model: string
  /** Tokens the call is expected to use (prompt + max output), as the upstream counts them. */
  readonly tokens: number
  /**
   * The share of each deployment's declared capacity the call may fill (a flex call's
   * flexShare: capacity/port.ts CapacityEstimate.share); absent: all of it. A call refused
   * on its share is answered flex_capacity (the same wait, its own code).
   */
  readonly share?: number
  /** Increments per call; spreads calls by weight when capacity has nothing to say (pickOrder). */
  readonly counter: number
  readonly breaker?: CircuitBreaker
  readonly now?: () => number
  /** Called once, when the first deployment is picked (before it answers). */
  readonly onPicked?: () => void
}

export interface PickedResult<T extends FailoverTarget> extends FailoverResult<T> {
  /** Held on the deployment that answered until the call is settled: release it then, with the usage. */
  readonly lease: CapacityLease
}

/** The capacity id of a failover target (its adapter is named after its backend). */
export function targetIdOf(target: FailoverTarget): string {
  return deploymentIdOf({ backend: target.adapter.name, upstreamModel: target.upstreamModel })
}

/**
 * The gateway's 429 when no deployment has room: retry-after (seconds, rounded up) and
 * retry-after-ms count to `retryAt`. Null (the call is larger than any deployment's whole
 * tpm) says no wait helps.
 */
export function capacityRefusal(retryAt: number | null, now: number = Date.now(), share?: number): GatewayError {
  if (retryAt === null) {
    return gatewayError('upstream_capacity', {
      message: 'This request needs more tokens than any deployment of this model takes in a minute.',
      headers: { 'x-should-retry': 'false' },
    })
  }
  const ms = Math.max(1, Math.ceil(retryAt - now))
  const headers = { 'retry-after': String(Math.ceil(ms / 1000)), 'retry-after-ms': String(ms) }
  if (share !== undefined && share < 1) {
    // Shed first: the deployments are too busy for flex, not necessarily for everyone.
    return gatewayError('flex_capacity', {
      message:
        `Every deployment of this model is too busy for flex calls right now: flex fills at most ${Math.round(share * 100)} % ` +
        "of a deployment's capacity, the rest is kept for default and priority calls. Try again after retry-after-ms, " +
        "send it as service_tier 'default', or through /queue, where a flex call waits for room instead.",
      headers,
    })
  }
  return gatewayError('upstream_capacity', { headers })
}

/** When a capacity refusal may succeed (epoch ms), or undefined for any other error. */
export function capacityRetryAt(error: unknown, now: number = Date.now()): number | undefined {
  if (
    !(error instanceof GatewayError) ||
    (error.errorName !== 'upstream_capacity' && error.errorName !== 'flex_capacity')
  )
    return undefined
  const ms = Number(error.headers['retry-after-ms'])
  return Number.isFinite(ms) && ms > 0 ? now + ms : undefined
}

type Choice<T> = { readonly target: T; readonly lease: CapacityLease } | { readonly retryAt: number | null }

/** The next deployment among `left` (in configured order), and its lease; or when one may have room. */
async function pick<T extends FailoverTarget>(left: readonly T[], o: PickOptions<T>): Promise<Choice<T>> {
  const ask = o.share === undefined ? { tokens: o.tokens } : { tokens: o.tokens, share: o.share }
  const got = await o.capacity.acquire(left.map(targetIdOf), ask)
  if (!got.ok) return { retryAt: got.retryAt }
  const chosen = left.find((t) => targetIdOf(t) === got.lease.deploymentId)
  if (got.lease.tracked && chosen !== undefined) return { target: chosen, lease: got.lease }
  // Nothing held anywhere: capacity has nothing to say, the configured order stands.
  const first = left[0] as T
  if (chosen === first) return { target: first, lease: got.lease }
  await got.lease.release()
  const own = await o.capacity.acquire([targetIdOf(first)], ask)
  return own.ok ? { target: first, lease: own.lease } : { retryAt: own.retryAt }
}

/** The start of a refusal's body, read within bounds; the body is gone afterwards. */
async function bodyStart(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  const timer = setTimeout(() => body.destroy(), REFUSAL_BODY_MS)
  try {
    for await (const chunk of body) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk))
      chunks.push(bytes)
      size += bytes.length
      if (size >= REFUSAL_BODY_BYTES) break
    }
  } catch {
    // Cut short (by the timer, or the upstream): what came is enough.
  } finally {
    clearTimeout(timer)
    body.destroy()
  }
  return Buffer.concat(chunks).subarray(0, REFUSAL_BODY_BYTES)
}

/**
 * A 429 or 503 before any body reached the client: observed, the lease released; the
 * response comes back with its (bounded) body read, to answer with if no one else serves.
 */
async function refused<T extends FailoverTarget>(
  response: UpstreamResponse,
  lease: CapacityLease,
  o: PickOptions<T>,
  now: number,
): Promise<{ readonly observation: UpstreamObservation; readonly response: UpstreamResponse }> {
  const body = await bodyStart(response.body)
  const observation = observeResponse(response.status, response.headers, { now, body: body.toString('utf8') })
  lease.observe(observation)
  await lease.release()
  o.metrics.upstreamRefusals.inc({ deployment: lease.deploymentId, kind: observation.kind })
  return { observation, response: { ...response, body: Readable.from([body]) } }
}

/**
 * Tries the deployments of `targets` (a model's, in configured order) as capacity picks
 * them until one serves. Throws upstream_capacity when none is left with room or every one
 * tried refused (429, 503); otherwise as sendWithFailover (the last 5xx, or
 * upstream_unreachable, when every one failed).
 */
export async function sendWithCapacity<T extends FailoverTarget>(
  targets: readonly T[],
  build: (target: T) => UpstreamRequest,
  o: PickOptions<T>,
): Promise<PickedResult<T>> {
  const now = o.now ?? Date.now
  const left = healthyFirst(pickOrder(targets, o.counter), o.breaker)
  let lastError: GatewayError | undefined
  let last5xx: PickedResult<T> | undefined
  /** The last refusal, kept to answer with when every deployment tried refused. */
  let lastRefusal: PickedResult<T> | undefined
  /** When the earliest deployment that refused said it may serve again. */
  let refusedUntil: number | null = null
  let from: string | undefined
  let attempts = 0
  while (left.length > 0) {
    const picked = await pick(left, o)
    if (!('target' in picked)) {
      if (last5xx !== undefined) return { ...last5xx, attempts }
      // The ones tried refused, the rest are full: the gateway's answer, not the upstream's.
      discard(lastRefusal)
      // Refused on its share only when no deployment's own refusal (429, 503) came first.
      throw capacityRefusal(earliest(picked.retryAt, refusedUntil), now(), refusedUntil === null ? o.share : undefined)
    }
    const { target, lease } = picked
    if (attempts === 0) o.onPicked?.()
    left.splice(left.indexOf(target), 1)
    // Every move to another deployment after one did not serve: a refusal, another 5xx, no connection.
    if (from !== undefined) o.metrics.deploymentMoves.inc({ model: o.model, from, to: lease.deploymentId })
    const request = build(target)
    attempts += 1
    const sent = await sendOnce(target, request, o.breaker)
    if (!sent.ok) {
      // It never reached the upstream (or may have: a timeout); nothing to learn from it.
      await lease.release()
      o.onAttemptFailed?.(target, sent.error, sent.final ? undefined : left[0])
      if (sent.final) {
        discard(last5xx)
        discard(lastRefusal)
        throw sent.error
      }
      lastError = sent.error
      from = lease.deploymentId
      continue
    }
    const response = sent.response
    const status = response.status
    if ((status === 429 || status === 503) && !request.signal.aborted) {
      discard(lastRefusal)
      const refusal = await refused(response, lease, o, now())
      lastRefusal = { response: refusal.response, target, attempts, lease }
      refusedUntil = earliest(refusal.observation.cooldownUntil, refusedUntil)
      // A 503 is a 5xx too: counted and logged as failover.ts counts one.
      if (status >= 500) o.onAttemptFailed?.(target, status, left[0])
      from = lease.deploymentId
      continue
    }
    lease.observe(observeResponse(status, response.headers, { now: now() }))
    if (status === 401 || status === 403) {
      // The gateway's own credential for this deployment was refused, not the caller's key:
      // final, and never the upstream's answer (its body is left unread: it may quote the credential).
      await lease.release()
      discard(last5xx)
      discard(lastRefusal)
      response.body.destroy()
      const error = gatewayError('upstream_auth_failed', { headers: { 'x-should-retry': 'false' } })
      o.onAttemptFailed?.(target, error, undefined)
      throw error
    }
    if (status < 500) {
      discard(last5xx)
      discard(lastRefusal)
      return { response, target, attempts, lease }
    }
    // Any other 5xx: as failover.ts, kept to answer with if no other deployment serves.
    await lease.release()
    o.onAttemptFailed?.(target, status, request.signal.aborted ? undefined : left[0])
    discard(last5xx)
    last5xx = { response, target, attempts, lease }
    from = lease.deploymentId
    if (request.signal.aborted) break
  }
  // Every deployment tried refused (429 or 503: the upstream did not act on the call): each is
  // cooling down now, so the answer is the gateway's own 429 with the time the first frees up,
  // never an upstream's refusal. Another 5xx is a failure, answered as failover.ts answers one.
  if (last5xx === undefined && lastRefusal !== undefined && refusedUntil !== null) {
    discard(lastRefusal)
    throw capacityRefusal(refusedUntil, now())
  }
  const kept = last5xx ?? lastRefusal
  if (kept !== undefined) return { ...kept, attempts }
  throw (
    lastError ?? new GatewayError('upstream_unreachable', { message: 'No deployment is configured for this model.' })
  )
}

function earliest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b)
}
