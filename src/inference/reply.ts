// The way back of one admitted call, once a deployment answered: what the reply passes
// through on its way to the exchange (ownership recorded or filtered, a short list page
// filled from further upstream pages, an upload's room, the ids it hands out), the relay
// with its usage tap and the stream journal, and the settlement once it is known what
// flowed: the limits reconciled, the usage metered, the tokens counted (outcome.ts).
import { NO_USAGE, type UpstreamRequest, type UpstreamResponse, type Usage } from '../backends/port.ts'
import type { Deployment } from '../backends/registry.ts'
import type { CapacityLease } from '../capacity/port.ts'
import { gatewayError } from '../errors.ts'
import { callCost, costNanos } from '../keys/money.ts'
import type { StreamTally } from '../keys/stream-journal.ts'
import { countPromptTokens } from '../limits/estimate.ts'
import type { Admission } from '../limits/port.ts'
import { detachedClient } from '../proxy/detached-client.ts'
import { captureCompletion, traceSettlement, type CompletionCapture } from '../observability/call-spans.ts'
import { unmasking } from '../guardrails/restore.ts'
import { relay, type RelayOptions, type RelayOutcome } from '../proxy/relay.ts'
import type { Exchange, InferenceDeps, PreparedCall } from './call.ts'
import { listPaging } from './list-pages.ts'
import { turnWritten } from '../turn-batches.ts'
import { chargedUsage, unserved } from './failed-charge.ts'
import { recordCharge, type Ending } from './outcome.ts'
import { ownershipTransformOf } from './ownership.ts'
import { replyObjectsOf, type ReplyObjects } from './reply-objects.ts'
import type { StreamAsk } from './upstream-request.ts'
import { isBatchLine } from '../priority/classes.ts'

export type ReplyDeps = Pick<InferenceDeps, 'config' | 'ownership' | 'fileQuota' | 'meter' | 'metrics' | 'streams'>

/** The reply of one admitted call; settled once, whichever way it ends. */
export class Reply {
  readonly #deps: ReplyDeps
  readonly #call: PreparedCall
  readonly #exchange: Exchange
  readonly #admission: Admission
  readonly #transformJson: RelayOptions['transformJson']
  readonly #handedOut: ReplyObjects | undefined
  /** The completion for the call's span, only with tracing.captureContent. */
  readonly #completion: CompletionCapture | undefined
  /** The deployment that answered; a list filtered by owner is filled from it. */
  #servedBy: Deployment | undefined
  /** Its capacity lease, released with the real usage when the call is settled. */
  #lease: CapacityLease | undefined
  #tally: StreamTally | undefined
  #settled = false

  /** `build` is the request a deployment is sent for this call (upstream-request.ts). */
  constructor(
    deps: ReplyDeps,
    call: PreparedCall,
    exchange: Exchange,
    admission: Admission,
    build: (target: Deployment) => UpstreamRequest,
  ) {
    this.#deps = deps
    this.#call = call
    this.#exchange = exchange
    this.#admission = admission
    const { spec, params, query, principal, body } = call
    // A list filtered by owner is filled from the deployment that served its first page
    // (paging backwards with `before` is left as the upstream's page).
    const paging =
      spec.ownership?.action === 'list' && !query.has('before')
        ? listPaging({
            query,
            jsonLimitBytes: deps.config.server.upstreamJsonLimitBytes,
            send: async (pageSearch) => {
              const servedBy = this.#servedBy
              if (servedBy === undefined) throw gatewayError('internal')
              const pagePath = `${spec.upstreamPath(params)}?${pageSearch}`
              return servedBy.adapter.send({
                ...build(servedBy),
                path: pagePath,
                client: detachedClient(spec.method, pagePath),
              })
            },
          })
        : undefined
    const owned = ownershipTransformOf(deps.ownership, spec, principal.owner, paging)
    this.#transformJson = unmasking(call.upload?.onReply(owned) ?? deps.fileQuota?.onDelete(spec, owned) ?? owned, call)
    // A stored response and its items become the caller's to name later (object-ids.ts).
    this.#completion = captureCompletion(exchange.trace)
    this.#handedOut = replyObjectsOf(
      spec.endpoint,
      body.kind === 'json' ? body.value : null,
      deps.ownership,
      principal.owner,
      exchange.log,
    )
  }

  /** The deployment that answered, and the capacity it holds until the call is settled. */
  served(target: Deployment, lease?: CapacityLease): void {
    this.#servedBy = target
    this.#lease = lease
  }

  /** Relays the upstream's answer into the exchange; a whole reply is settled before its last bytes. */
  async relay(response: UpstreamResponse, ask: StreamAsk): Promise<RelayOutcome> {
    const { spec, modelName, body } = this.#call
    const { metrics, config } = this.#deps
    const exchange = this.#exchange
    if (ask.stream) metrics.activeStreams.inc()
    if (ask.stream && exchange.live === true && response.status < 300) this.#journal()
    try {
      const tally = this.#tally
      return await relay(exchange.sink, response, {
        stream: ask.stream,
        clientWantsUsage: ask.clientWantsUsage,
        promptTokens: () => countPromptTokens(spec.endpoint, body.kind === 'json' ? body.value : null),
        jsonLimitBytes: config.server.upstreamJsonLimitBytes,
        signal: exchange.signal,
        idleReaderMs: config.server.idleReaderTimeoutMs,
        ...(modelName !== null ? { publicModel: modelName } : {}),
        // A class other than the default is said on the reply (priority/classes.ts); a default call's is the upstream's.
        ...(this.#call.serviceClass === undefined || this.#call.serviceClass === 'default'
          ? {}
          : { serviceTier: this.#call.serviceClass }),
        // Creating, listing and deleting record or filter ownership from the reply.
        ...(this.#transformJson === undefined ? {} : { transformJson: this.#transformJson }),
        commit: this.settle,
        ...observing(this.#handedOut?.observe, this.#completion?.observe),
        ...(tally === undefined ? {} : { delivered: tally.delivered }),
        ...(ask.stream && this.#call.replyCheck !== undefined ? { gate: this.#call.replyCheck.gate() } : {}),
      })
    } finally {
      if (ask.stream) metrics.activeStreams.dec()
    }
  }

  /**
   * Settles the call, once: by the relay before a whole reply's last bytes (so a crash
   * right after loses nothing a client received), or after it for a reply that broke off.
   */
  readonly settle = async (final: Usage): Promise<void> => {
    if (this.#settled) return
    this.#settled = true
    this.#exchange.notes.usage = final
    // Its checkpoints land before the write that meters it and removes its entry.
    await this.#tally?.close()
    // The upstream counts what it served: the deployment's estimate becomes the usage (never throws).
    const lease = this.#lease?.release({ tokens: final.inputTokens + final.outputTokens })
    this.#completion?.flush()
    await traceSettlement(this.#exchange.trace, final, async () => {
      await Promise.all([this.#written(this.#charge(final)), this.#handedOut?.flush(), lease])
    })
  }

  /**
   * The charge's writes once they have left the process (turnWritten), not once the store
   * answered them: a gateway killed right after still has them written, and the client's
   * last bytes do not wait a Redis round trip. What the store answers (a budget crossing,
   * the usage counters) is taken when it comes; the charge never rejects (the limiter and
   * the meter keep their failures), and would be logged if it did.
   */
  #written(charge: Promise<void>): Promise<void> {
    const log = this.#exchange.log
    const kept = charge.catch((err: unknown) => {
      log.error({ err }, 'a call could not be charged')
    })
    return Promise.race([kept, turnWritten()])
  }

  /**
   * Settles the attempt by how it ended (failed-charge.ts), unless the relay settled it: one
   * no upstream acted on is withdrawn (its reservation and its request go back whole, no usage
   * row counts it); any other is charged what flowed, at least its input once it timed out.
   */
  async conclude(ending: Pick<Ending, 'relayed' | 'error' | 'failedSending'>): Promise<void> {
    const { relayed, error } = ending
    // Failover caught it and gave it back (a wait for room, a put back: nothing reached), or it threw.
    const withdrawn = relayed === undefined && (error === undefined ? ending.failedSending : unserved(error))
    if (!withdrawn)
      return this.settle(chargedUsage(relayed?.usage ?? NO_USAGE, relayed?.error ?? error, this.#call.estimate))
    if (this.#settled) return
    this.#settled = true
    this.#exchange.notes.usage = NO_USAGE
    await Promise.all([this.#admission.settle(NO_USAGE, { withdrawn: true }), this.#lease?.release({ tokens: 0 })])
  }

  /** A live stream is journalled as it flows, so a crash still charges what was sent. */
  #journal(): void {
    const { principal, resolved, estimate } = this.#call
    const { limits } = resolved
    this.#tally = this.#deps.streams?.begin({
      keyId: principal.keyId,
      owner: principal.owner,
      tier: resolved.tier,
      model: resolved.model,
      inputTokens: estimate.inputTokens,
      reservedOutputTokens: estimate.outputTokens,
      cost: (input, output) => costNanos(limits, input, output),
    })
  }

  /** The limits reconciled with what flowed, and the usage metered (once, for a stored request: Exchange.chargeAs). */
  async #charge(usage: Usage): Promise<void> {
    const { principal, resolved, modelName } = this.#call
    const as = this.#exchange.chargeAs?.() ?? 'plain'
    // Cut to run again: that run is charged; this one gives its reservation back whole.
    if (as === 'nothing') return this.#admission.settle(NO_USAGE, { withdrawn: true })
    const once = as === 'plain' ? undefined : as
    const stream = this.#tally?.id
    const cost = callCost(resolved.limits, resolved.model, usage)
    const cacheRead = usage.cacheReadTokens ?? 0
    const cacheWrite = usage.cacheWriteTokens ?? 0
    // Both in flight at once: one round trip of waiting, not two.
    await Promise.all([
      this.#admission.settle(usage, once === undefined ? undefined : { once }),
      this.#deps.meter.record({
        keyId: principal.keyId,
        owner: principal.owner,
        tier: resolved.tier,
        model: resolved.model,
        inputTokens: usage.inputTokens,
        outputTokens: usage.outputTokens,
        costNanos: cost.totalNanos,
        // Apart only when there are any: most calls have none, and their rows stay as they were.
        ...(cacheRead > 0 || cacheWrite > 0
          ? {
              cacheReadTokens: cacheRead,
              cacheWriteTokens: cacheWrite,
              cacheReadCostNanos: cost.cacheReadNanos,
              cacheWriteCostNanos: cost.cacheWriteNanos,
            }
          : {}),
        // A batch's line: its request and its cost apart as well (usage, the portal, the CSV).
        ...(isBatchLine(resolved) ? { batchRequests: 1, batchCostNanos: cost.totalNanos } : {}),
        ...(stream === undefined ? {} : { stream }),
        ...(once === undefined ? {} : { id: once.id, keepIdMs: once.keepMs }),
      }),
    ])
    recordCharge(this.#deps.metrics, modelName, resolved.tier, usage, cost.totalNanos)
  }
}

/** The relay's observe option for the observers there are (none, usually: no option). */
function observing(
  a: ((data: unknown) => void) | undefined,
  b: ((data: unknown) => void) | undefined,
): Pick<RelayOptions, 'observe'> {
  const observe =
    a === undefined
      ? b
      : b === undefined
        ? a
        : (data: unknown) => {
            a(data)
            b(data)
          }
  return observe === undefined ? {} : { observe }
}
