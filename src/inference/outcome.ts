// What the corridor records about how a call went, in one place: each failed upstream
// attempt as it fails (a failover is one followed by another deployment), how the upstream
// phase ended (timings, a reply that broke off or a client that stopped reading, errors no
// attempt counted), and, once settled, the tokens and cost charged. The access log reads
// the notes written here when the request is over (http/access-log.ts).
import type { Usage } from '../backends/port.ts'
import type { Endpoint } from '../config/schema.ts'
import { GatewayError } from '../errors.ts'
import { toUnits } from '../keys/money.ts'
import type { Logger } from '../observability/logger.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { RelayOutcome } from '../proxy/relay.ts'
import type { CallNotes } from './call.ts'

/** Where an outcome is recorded: the gateway's metrics, the call's log and its notes. */
export interface OutcomeRecord {
  readonly metrics: Metrics
  readonly log: Logger
  readonly notes: CallNotes
}

/** How the upstream phase of one attempt went, filled in as it goes. */
export interface Ending {
  readonly endpoint: Endpoint
  /** performance.now() when the upstream phase began. */
  readonly started: number
  /** The first deployment in line, named for an error that came before any answered. */
  readonly firstBackend: string | undefined
  readonly idleReaderMs: number
  /** A failed attempt was counted as it failed (recordFailedAttempt). */
  attemptFailed: boolean
  /** The call failed inside failover, before any deployment's answer was taken. */
  failedSending: boolean
  /** What the relay reported, when the reply was relayed. */
  relayed?: RelayOutcome
  /** What ended the attempt when it threw. */
  error?: unknown
}

/** A deployment could not serve; `next` is the deployment tried after it, if any. */
export function recordFailedAttempt(
  { metrics, log }: Omit<OutcomeRecord, 'notes'>,
  deployments: number,
  backend: string,
  reason: GatewayError | number,
  next: string | undefined,
): void {
  // Every failed attempt is an upstream error, the ones a failover then saved too; only an
  // attempt followed by another deployment is a failover.
  metrics.upstreamErrors.inc({ backend, reason: reason instanceof GatewayError ? reason.errorName : 'status_5xx' })
  const fields = { backend, reason: describeReason(reason) }
  if (reason instanceof GatewayError && reason.errorName === 'upstream_auth_failed') {
    // The operator's to fix (the caller only sees a 502): said at error level, naming the backend.
    log.error(fields, 'the upstream refused the gateway credential of this backend: check its apiKeyEnv and headers')
  } else if (next !== undefined) {
    metrics.failovers.inc({ backend })
    log.warn({ ...fields, next }, 'upstream attempt failed; trying the next deployment')
  } else {
    log.warn(
      fields,
      deployments > 1
        ? 'upstream attempt failed; no other deployment is tried'
        : 'upstream attempt failed; the model has no other deployment',
    )
  }
}

/** The upstream phase is over (relayed, thrown, or put back): its timings, and what went wrong. */
export function recordOutcome({ metrics, log, notes }: OutcomeRecord, ending: Ending): void {
  const { relayed, error, endpoint } = ending
  if (relayed !== undefined) {
    const backend = notes.backend ?? 'none'
    if (relayed.firstByteMs !== undefined)
      metrics.timeToFirstByte.observe({ backend, endpoint }, relayed.firstByteMs / 1000)
    if (relayed.stalled) {
      notes.errorName = 'client_read_timeout'
      log.warn(
        { backend, idleReaderMs: ending.idleReaderMs },
        'client stopped reading; stream ended and charged what was sent',
      )
    }
    if (relayed.error) {
      // The reply had already started: the client got what could still be sent. Always
      // the gateway's own error (an upstream's relayed error body is no error of ours).
      notes.errorName = relayed.error.errorName
      metrics.upstreamErrors.inc({ backend, reason: relayed.error.errorName })
      log.warn(
        { backend, error: relayed.error.errorName, usageSource: relayed.usageSource },
        'upstream reply broke off',
      )
    }
  }
  // Failed attempts are counted as they fail; this counts the rest (a reply that fails
  // once relayed, a model with no deployment at all).
  if (error instanceof GatewayError && !(ending.failedSending && ending.attemptFailed)) {
    metrics.upstreamErrors.inc({ backend: notes.backend ?? ending.firstBackend ?? 'none', reason: error.errorName })
  }
  notes.upstreamMs = performance.now() - ending.started
  metrics.upstreamDuration.observe({ backend: notes.backend ?? 'none', endpoint }, notes.upstreamMs / 1000)
}

/** What a settled call charged, by model and tier (calls without a model count nowhere). */
export function recordCharge(
  metrics: Metrics,
  model: string | null,
  tier: string,
  usage: Usage,
  costNanos: number,
): void {
  if (model === null) return
  metrics.tokens.inc({ model, tier, direction: 'input' }, usage.inputTokens)
  metrics.tokens.inc({ model, tier, direction: 'output' }, usage.outputTokens)
  // Only calls that touched the cache make a series: most models never do.
  const read = usage.cacheReadTokens ?? 0
  const write = usage.cacheWriteTokens ?? 0
  if (read > 0) metrics.cacheTokens.inc({ model, tier, kind: 'read' }, read)
  if (write > 0) metrics.cacheTokens.inc({ model, tier, kind: 'write' }, write)
  if (costNanos > 0) metrics.cost.inc({ model, tier }, toUnits(costNanos))
}

function describeReason(reason: unknown): string {
  if (reason instanceof GatewayError) return reason.errorName
  if (typeof reason === 'number') return `status ${reason}`
  return 'error'
}
