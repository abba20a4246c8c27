// The corridor of a proxied call (/v2, /v1, /queue), one step per function below:
//   enter:   authenticate → scopes → intake (read + validate body → resolve model → ownership →
//            estimate; intake.ts) → guardrails (its text; guardrails/) → hand the prepared call on
//   run:     cache (a hit ends here) → admit (the strategy) → forward, again when the strategy puts an attempt back
//   forward: the request each deployment is sent (upstream-request.ts, responses-over-chat/) →
//            upstream with failover → relay into the exchange (usage tap) → settle (reply.ts)
// and what each attempt records is written in one place (outcome.ts; its spans: call-spans.ts).
// /v2 and /queue walk the same corridor. What differs is passed in: how a call is
// admitted (an AdmissionStrategy: /v2 asks the limiter once and answers its 429; /queue
// waits in the key's line first), and where the reply goes (an Exchange: a live client,
// or a recorder when a queue worker runs a stored request with nobody connected).
import type { Deployment } from '../backends/registry.ts'
import { NO_USAGE, type UpstreamRequest } from '../backends/port.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import { bodyRateOf, type BodyRate } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import type { Params } from '../http/router.ts'
import type { Principal } from '../keys/record.ts'
import { traceAdmission, tracedTargets } from '../observability/call-spans.ts'
import { resolveLimits, tierOf } from '../limits/plans.ts'
import type { Admission } from '../limits/port.ts'
import { CircuitBreaker } from '../proxy/circuit-breaker.ts'
import { capacityRetryAt, sendWithCapacity, targetIdOf, type PickedResult } from '../proxy/deployment-pick.ts'
import type { AdmissionStrategy, CallResult, Exchange, InferenceDeps, PreparedCall } from './call.ts'
import { identify, setHeaders, showLimits } from './caller.ts'
import type { EndpointSpec } from './endpoints.ts'
import { admissionRequestOf, classedLimits, prepare, screened, type IntakeOptions, type Taken } from './intake.ts'
import { recordFailedAttempt, recordOutcome, type Ending } from './outcome.ts'
import { Reply } from './reply.ts'
import { capacityShare } from '../priority/classes.ts'
import { cutShare, fairRefusal } from '../fairness/capacity-share.ts'
import { checkEndpointScope, checkModelScope } from './scopes.ts'
import { deploymentsServing, replyFor, requestFor } from './responses-over-chat/index.ts'
import { streamAskOf, upstreamPathOf, type UpstreamCall } from './upstream-request.ts'

export type { AdmissionStrategy, CallNotes, CallResult, Exchange, InferenceDeps, PreparedCall } from './call.ts'

export interface EnterOptions extends IntakeOptions {
  /** Route label for logs and metrics; default the endpoint name. */
  readonly route?: string
}

export interface Corridor {
  /**
   * The corridor up to admission for a live request: authenticate → scopes → body →
   * model → ownership → limits → estimate. Then `proceed` takes the call. A refusal on
   * the way (or from `proceed`) still tells the client where its limits stand. A spooled
   * upload is deleted once `proceed` is done.
   */
  enter(
    ctx: RequestContext,
    spec: EndpointSpec,
    params: Params,
    query: URLSearchParams,
    proceed: (call: PreparedCall) => Promise<void>,
    options?: EnterOptions,
  ): Promise<void>
  /** Admit (the strategy) → upstream with failover → relay into the exchange → settle. */
  run(call: PreparedCall, exchange: Exchange, strategy: AdmissionStrategy): Promise<CallResult>
  /** A call for a key and a body checked earlier (a stored request; `batch`: a batch's line): scopes checked again, on the configuration in force now. */
  restore(principal: Principal, spec: EndpointSpec, parts: RestoredParts): PreparedCall
}

/** What a stored request keeps of its call (corridor.restore). */
export type RestoredParts = Pick<PreparedCall, 'params' | 'query' | 'body' | 'modelName' | 'estimate'> & {
  readonly batch?: true
}

/** Returned by forward() when the strategy puts an upstream failure back, or waits for a deployment to have room. */
const PUT_BACK = Symbol('put back')
const WAIT_CAPACITY = Symbol('wait for capacity')

/** What every call through one corridor shares. */
interface Shared extends InferenceDeps {
  /** Spreads calls over a model's deployments by weight when capacity has nothing to say (pickOrder). */
  rotation: number
  /** A deployment that keeps failing to connect is tried last for a while. */
  readonly breaker: CircuitBreaker
  readonly bodyRate: BodyRate
}

/** One admitted attempt at a call. */
interface Attempt {
  readonly call: PreparedCall
  readonly exchange: Exchange
  readonly admission: Admission
  readonly strategy: AdmissionStrategy
  /** 0, then n after n upstream failures were put back (waits for capacity do not count). */
  readonly attempt: number
}

export function createCorridor(deps: InferenceDeps): Corridor {
  const shared: Shared = {
    ...deps,
    rotation: 0,
    breaker: deps.breaker ?? new CircuitBreaker(),
    bodyRate: bodyRateOf(deps.config.server),
  }
  const corridor: Corridor = {
    enter: (ctx, spec, params, query, proceed, options) =>
      enter(shared, ctx, { spec, params, query }, proceed, options),
    run: (call, exchange, strategy) => run(shared, call, exchange, strategy, corridor),
    restore: (principal, spec, parts) => restore(shared, principal, spec, parts),
  }
  return corridor
}

async function enter(
  s: Shared,
  ctx: RequestContext,
  target: Pick<PreparedCall, 'spec' | 'params' | 'query'>,
  proceed: (call: PreparedCall) => Promise<void>,
  options: EnterOptions = {},
): Promise<void> {
  const runtime = s.runtime.current // the one read of the configuration: the call keeps it to its end
  const principal = await identify(ctx, s.authenticate, options.route ?? target.spec.endpoint)
  ctx.tier = tierOf(principal.key, runtime.config.plans)
  checkEndpointScope(principal, target.spec.endpoint)
  const taken: Taken = { body: { kind: 'none' } }
  try {
    await proceed(
      await screened(s, ctx, await prepare(s, ctx.req, ctx, principal, { runtime, ...target }, options, taken)),
    )
  } catch (err) {
    // A refusal after authentication still tells the client where its limits stand (the limiter's 429s carry them).
    if (
      !ctx.res.headersSent &&
      !(
        err instanceof GatewayError &&
        err.status === 429 &&
        Object.keys(err.headers).some((h) => h.startsWith('x-ratelimit-'))
      )
    ) {
      await showLimits(
        ctx.res,
        s.limiter,
        principal.keyId,
        taken.resolved ?? resolveLimits(runtime.config.plans, principal.key, ctx.model ?? '*'),
      )
    }
    throw err
  } finally {
    await taken.upload?.end()
    if (taken.body.kind === 'multipart') await taken.body.dispose()
  }
}

function restore(s: Shared, principal: Principal, spec: EndpointSpec, restored: RestoredParts): PreparedCall {
  const runtime = s.runtime.current
  checkEndpointScope(principal, spec.endpoint)
  const { batch: _batch, ...parts } = restored
  if (parts.modelName !== null) checkModelScope(principal, parts.modelName)
  return { runtime, spec, principal, ...classedLimits(runtime.config.plans, principal, spec, restored), ...parts }
}

async function run(
  s: Shared,
  call: PreparedCall,
  exchange: Exchange,
  strategy: AdmissionStrategy,
  self: Corridor,
): Promise<CallResult> {
  // The response cache (src/cache/); a semantic lookup runs its embedding through this corridor (self).
  const cached = (await s.cache?.step(call, exchange, { limiter: s.limiter, meter: s.meter, corridor: self })) ?? {
    exchange,
  }
  if (cached.served !== undefined) return cached.served
  const request = admissionRequestOf(call)
  let attempt = 0
  for (let round = 0; ; round++) {
    const admission = await traceAdmission(exchange.trace, call.body, () => strategy.admit(request, round))
    setHeaders(exchange.sink, admission.headers)
    const result = await forward(s, { call, exchange: cached.exchange, admission, strategy, attempt })
    if (result === PUT_BACK) attempt++
    else if (result !== WAIT_CAPACITY) return result
  }
}

/** One admitted attempt: upstream with failover → relay into the exchange → settle, once. */
async function forward(s: Shared, a: Attempt): Promise<CallResult | typeof PUT_BACK | typeof WAIT_CAPACITY> {
  const { call, exchange } = a
  const { spec } = call
  const ask = streamAskOf(spec, call.body)
  exchange.notes.stream = ask.stream
  const targets = deploymentsServing(call.runtime.registry, spec, call.modelName)
  if (targets.length === 0) {
    await a.admission.settle(NO_USAGE, { withdrawn: true })
    throw gatewayError('capability_missing')
  }
  const upstream: UpstreamCall = {
    endpoint: spec.endpoint,
    method: spec.method,
    path: upstreamPathOf(spec, call.params, call.query),
    body: call.body,
    stream: ask.stream,
    requestId: exchange.id,
    signal: exchange.signal,
    client: exchange.client,
  }
  const build = (target: Deployment): UpstreamRequest => requestFor(upstream, target, call.estimate.sentCap)
  const reply = new Reply(s, call, exchange, a.admission, build)
  const ending: Ending = {
    endpoint: spec.endpoint,
    started: performance.now(),
    firstBackend: targets[0]?.adapter.name,
    idleReaderMs: s.config.server.idleReaderTimeoutMs,
    attemptFailed: false,
    failedSending: false,
  }
  try {
    const sent = await send(s, a, targets, build, ending)
    if (sent === PUT_BACK || sent === WAIT_CAPACITY) return sent
    reply.served(sent.target, sent.lease)
    const response = replyFor(sent.response, upstream, sent.target) // a chat-only deployment's, as the call's API
    const { status, usage, aborted } = (ending.relayed = await reply.relay(response, ask))
    return { status, usage, aborted }
  } catch (err) {
    ending.error = err
    throw err
  } finally {
    recordOutcome({ metrics: s.metrics, log: exchange.log, notes: exchange.notes }, ending)
    await reply.conclude(ending)
  }
}

/** Upstream with failover, among the deployments with room (proxy/deployment-pick.ts); PUT_BACK when the
 * strategy takes the failure back (nothing reached, or a 5xx before any byte reached the client);
 * WAIT_CAPACITY when it waits for a deployment with room rather than answering the upstream_capacity 429. */
async function send(
  s: Shared,
  a: Attempt,
  targets: readonly Deployment[],
  build: (target: Deployment) => UpstreamRequest,
  ending: Ending,
): Promise<PickedResult<Deployment> | typeof PUT_BACK | typeof WAIT_CAPACITY> {
  const { exchange, attempt } = a
  const { log } = exchange
  const putBack = (status: number): boolean =>
    a.strategy.retryUpstream?.(status, attempt) === true && !exchange.signal.aborted
  let sent: PickedResult<Deployment>
  const classShare = capacityShare(a.call.runtime.config.plans, a.call.resolved.tier, a.call.serviceClass)
  // A call that does not wait (/v2) of a party above its fair share fills less of a contended deployment.
  const fair = a.strategy.waitForCapacity === undefined ? s.fairCapacity?.shareOf(a.call) : undefined
  try {
    sent = await sendWithCapacity(tracedTargets(exchange.trace, targets), build, {
      capacity: a.call.runtime.capacity,
      metrics: s.metrics,
      model: a.call.modelName ?? '',
      tokens: a.call.estimate.inputTokens + a.call.estimate.outputTokens,
      share: cutShare(classShare, fair),
      counter: s.rotation++,
      breaker: s.breaker,
      onPicked: () => a.strategy.picked?.(),
      onAttemptFailed: (target, reason, next) => {
        ending.attemptFailed = true
        recordFailedAttempt(
          { metrics: s.metrics, log },
          targets.length,
          target.adapter.name,
          reason,
          next?.adapter.name,
        )
      },
    })
  } catch (caught) {
    const err = fairRefusal(caught, classShare, fair)
    ending.failedSending = true
    const retryAt = capacityRetryAt(err)
    const waits = retryAt !== undefined && a.strategy.waitForCapacity?.(retryAt, targets.map(targetIdOf)) === true
    if (waits && !exchange.signal.aborted) {
      log.info({ retryAt }, 'every deployment is full; the call waits for one to have room')
      return WAIT_CAPACITY
    }
    a.strategy.picked?.() // not waiting for capacity (any more): a turn in the capacity line passes on
    // Nothing reached the upstream: safe to send again later.
    if (err instanceof GatewayError && err.errorName === 'upstream_unreachable' && putBack(err.status)) {
      log.warn({ attempt }, 'no deployment could be reached; the call goes back in line')
      return PUT_BACK
    }
    throw err
  }
  exchange.notes.backend = sent.target.adapter.name
  const upstreamStatus = sent.response.status
  if ((upstreamStatus === 429 || upstreamStatus >= 500) && putBack(upstreamStatus)) {
    sent.response.body.destroy()
    log.warn(
      { backend: sent.target.adapter.name, status: upstreamStatus, attempt },
      'upstream refused; the call goes back in line',
    )
    return PUT_BACK
  }
  return sent
}
