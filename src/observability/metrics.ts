// Prometheus metrics, in their own registry (no global state), served on METRICS_PORT.
// Labels never carry a key id or anything a client chose freely: model names are only
// recorded when configured, so cardinality stays bounded.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

export interface Metrics {
  readonly registry: Registry
  readonly requests: Counter<'endpoint' | 'model' | 'status'>
  readonly requestDuration: Histogram<'endpoint' | 'model'>
  /**
   * What the gateway itself added to a call an upstream answered: its whole time less the
   * upstream phase (every attempt, body included) and any wait in a queue's line.
   */
  readonly gatewayOverhead: Histogram<'endpoint'>
  readonly upstreamDuration: Histogram<'backend' | 'endpoint'>
  readonly timeToFirstByte: Histogram<'backend' | 'endpoint'>
  readonly tokens: Counter<'model' | 'tier' | 'direction'>
  /** Of the input tokens, those read from (kind read) or written to (kind write) the upstream's prompt cache. */
  readonly cacheTokens: Counter<'model' | 'tier' | 'kind'>
  readonly cost: Counter<'model' | 'tier'>
  readonly rateLimited: Counter<'model' | 'tier' | 'reason'>
  readonly upstreamErrors: Counter<'backend' | 'reason'>
  readonly failovers: Counter<'backend'>
  /** Every 429 or 503 an upstream refused a call with, by deployment id and observation kind. */
  readonly upstreamRefusals: Counter<'deployment' | 'kind'>
  /** Calls moved to another deployment of their model because one refused or was full. */
  readonly deploymentMoves: Counter<'model' | 'from' | 'to'>
  readonly inflight: Gauge<'endpoint'>
  readonly activeStreams: Gauge
  readonly clientAborts: Counter<'endpoint'>
  readonly storeUp: Gauge
  /** Batches of spans the OTLP endpoint did not take (their spans are lost); only with tracing.enabled. */
  readonly traceExportErrors: Counter
  readonly limiterMode: Gauge<'mode'>
  readonly queueDepth: Gauge<'model'>
  /** Seconds the head of the longest-waiting line of each model has waited (read at scrape time). */
  readonly queueHeadAge: Gauge<'model'>
  readonly queueWait: Histogram<'mode'>
  readonly queueRequests: Counter<'mode' | 'outcome'>
  /** A drop-in call's wait by priority class (priority/classes.ts). */
  readonly queueClassWait: Histogram<'class'>
  /** Actual ÷ predicted wait of drop-in calls that were predicted to wait (queue/deadline.ts). */
  readonly queueWaitPredictionRatio: Histogram<'class'>
  /** Output tokens per reply a call without an output cap reserved on the rate limits, by what decided it (key, tier, model: a learned sketch; fixed). */
  readonly outputReservation: Histogram<'source'>
  /** Tokens served divided by the tier's fair-share weight (src/fairness/): equal rates between tiers are fair shares. */
  readonly fairShareTokens: Counter<'model' | 'tier'>
  /** Calls that went ahead of an earlier one in the capacity line for their fair share. */
  readonly fairShareOvertakes: Counter<'model'>
  readonly queueWorkerUp: Gauge
  readonly queueStarts: Counter<'path'>
  readonly queueLeasesRecovered: Counter
  /** Streams cut by a gateway that stopped, charged from their journal by this instance. */
  readonly usageRecovered: Counter
  /** The compacting collections run after a burst (compact-heap.ts): their pauses, and the memory they handed back. */
  readonly heapCompactions: Histogram
  readonly heapCompactionReleased: Counter
  /** The RAG gateway, per service: requests by status class (2xx, 4xx, ...) and their latency. */
  readonly ragRequests: Counter<'service' | 'class'>
  readonly ragDuration: Histogram<'service'>
  /** RAG gateway logins, by outcome: success, invalid_credentials, throttled, invalid_body. */
  readonly logins: Counter<'outcome'>
  /** RAG gateway refresh-token uses, by outcome: rotated, reused (the session is revoked), invalid. */
  readonly tokenRefreshes: Counter<'outcome'>
  /** The signing key's planned end of life, read at scrape time: see setSigningKeySource. */
  readonly signingKeyExpiry: Gauge<'kid'>
  /** Where the depth and head-age gauges read the lines from at scrape time (the queue sets it). */
  setQueueSource(source: () => Promise<readonly QueueLineReading[]>): void
  /** Calls of this gateway waiting for a deployment to have room (the capacity line), read at scrape time. */
  readonly queueCapacityWaiting: Gauge
  /** Where that gauge reads the count from (the queue sets it; no sample until then). */
  setCapacityLineSource(source: () => number): void
  /** Where the signing-key gauge reads the key that signs now (the RAG token side sets it). */
  setSigningKeySource(source: () => SigningKeyReading | null): void
  /** Per deployment (its capacity id) and public model, read at scrape time: see setCapacitySource. */
  readonly deploymentRemainingRequests: Gauge<'deployment' | 'model'>
  readonly deploymentRemainingTokens: Gauge<'deployment' | 'model'>
  readonly deploymentInflight: Gauge<'deployment' | 'model'>
  readonly deploymentCoolingDown: Gauge<'deployment' | 'model'>
  readonly deploymentCooldownSeconds: Gauge<'deployment' | 'model'>
  /**
   * Where the deployment gauges read from at scrape time (main.ts sets it over the
   * capacity's inspect()). One read per scrape serves all five; a read that fails, or a
   * deployment whose state is unknown, gives no sample rather than an error or a stale one.
   */
  setCapacitySource(source: () => Promise<readonly DeploymentReading[]>): void
}

/** One line of the queue (a key's calls to a model), as the queue gauges show it. */
export interface QueueLineReading {
  readonly model: string
  readonly depth: number
  /** Epoch ms when the ticket whose turn it is joined the line; null for an empty line. */
  readonly headJoinedAt: number | null
}

/** The JWT signing key that signs now: its id and when its planned life ends (epoch ms). */
export interface SigningKeyReading {
  readonly kid: string
  readonly expiresAt: number
}

/** One deployment of one public model, as the capacity gauges show it. */
export interface DeploymentReading {
  /** The capacity id: `<backend>/<upstream model>`. */
  readonly deployment: string
  readonly model: string
  /** Null: nothing declared or learned says (no sample). */
  readonly remainingRequests: number | null
  readonly remainingTokens: number | null
  readonly inFlight: number
  /** Epoch ms, or null when it is not cooling down. */
  readonly coolingUntil: number | null
}

// The gateway's own time is usually a millisecond or two: finer buckets than a whole call's.
const OVERHEAD_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]

/**
 * A read of `source()` that callers arriving while one is in progress share; `fallback` when
 * there is no source or the read fails (a scrape never fails on it).
 */
function sharedRead<T, F>(source: () => (() => Promise<T>) | null, fallback: F): () => Promise<T | F> {
  let inProgress: Promise<T | F> | null = null
  return () => {
    const read = source()
    if (read === null) return Promise.resolve(fallback)
    inProgress ??= read()
      .catch(() => fallback)
      .finally(() => {
        inProgress = null
      })
    return inProgress
  }
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry()
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'tollgate_' })
  const registers = [registry]
  let queueSource: (() => Promise<readonly QueueLineReading[]>) | null = null
  let capacityLineSource: (() => number) | null = null
  let signingKeySource: (() => SigningKeyReading | null) | null = null
  let capacitySource: (() => Promise<readonly DeploymentReading[]>) | null = null
  // Gauges fed by one source run their collect() side by side in a scrape: they share one read.
  const readQueue = sharedRead(() => queueSource, null)
  const readCapacity = sharedRead(() => capacitySource, [])
  const deploymentGauge = (
    name: string,
    help: string,
    value: (r: DeploymentReading, now: number) => number | null,
  ): Gauge<'deployment' | 'model'> =>
    new Gauge({
      name,
      help,
      labelNames: ['deployment', 'model'],
      registers,
      async collect() {
        const readings = await readCapacity()
        const now = Date.now()
        this.reset()
        for (const r of readings) {
          const v = value(r, now)
          if (v !== null) this.set({ deployment: r.deployment, model: r.model }, v)
        }
      },
    })
  const coolingLeft = (r: DeploymentReading, now: number): number =>
    r.coolingUntil !== null && r.coolingUntil > now ? (r.coolingUntil - now) / 1000 : 0
  return {
    registry,
    requests: new Counter({
      name: 'tollgate_requests_total',
      help: 'Requests answered, by endpoint, model and HTTP status',
      labelNames: ['endpoint', 'model', 'status'],
      registers,
    }),
    requestDuration: new Histogram({
      name: 'tollgate_request_duration_seconds',
      help: 'Time from request to the end of the reply',
      labelNames: ['endpoint', 'model'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    gatewayOverhead: new Histogram({
      name: 'tollgate_gateway_overhead_seconds',
      help: "Time the gateway added to a call an upstream answered: the call's whole time less the upstream phase (every attempt, body included) and any wait in a queue's line",
      labelNames: ['endpoint'],
      buckets: OVERHEAD_BUCKETS,
      registers,
    }),
    upstreamDuration: new Histogram({
      name: 'tollgate_upstream_duration_seconds',
      help: 'Time spent on the upstream call, body included',
      labelNames: ['backend', 'endpoint'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    timeToFirstByte: new Histogram({
      name: 'tollgate_upstream_ttfb_seconds',
      help: 'Time until the upstream sent its first body byte',
      labelNames: ['backend', 'endpoint'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    tokens: new Counter({
      name: 'tollgate_tokens_total',
      help: 'Tokens that flowed, by direction (input or output)',
      labelNames: ['model', 'tier', 'direction'],
      registers,
    }),
    // A counter apart rather than more `direction`s: input stays the whole prompt, so a
    // sum over directions (and every dashboard on it) still means what it did.
    cacheTokens: new Counter({
      name: 'tollgate_cache_tokens_total',
      help: "Of the input tokens, those read from (kind read) or written to (kind write) the upstream's prompt cache",
      labelNames: ['model', 'tier', 'kind'],
      registers,
    }),
    cost: new Counter({
      name: 'tollgate_cost_total',
      help: 'Metered cost in plan currency units',
      labelNames: ['model', 'tier'],
      registers,
    }),
    rateLimited: new Counter({
      name: 'tollgate_rate_limited_total',
      help: 'Requests refused with 429, by the limit that refused them',
      labelNames: ['model', 'tier', 'reason'],
      registers,
    }),
    upstreamErrors: new Counter({
      name: 'tollgate_upstream_errors_total',
      help: 'Failed upstream attempts (unreachable, timeout, 5xx), including those a failover then saved',
      labelNames: ['backend', 'reason'],
      registers,
    }),
    failovers: new Counter({
      name: 'tollgate_failovers_total',
      help: 'Failed attempts after which another deployment was tried',
      labelNames: ['backend'],
      registers,
    }),
    upstreamRefusals: new Counter({
      name: 'tollgate_upstream_refusals_total',
      help: 'Upstream refusals (429, or 503 before any body), by deployment and kind (rate_limited, out_of_quota, queue_full, overloaded)',
      labelNames: ['deployment', 'kind'],
      registers,
    }),
    deploymentMoves: new Counter({
      name: 'tollgate_deployment_moves_total',
      help: 'Calls moved on to another deployment of their model after one did not serve them (an upstream 429 or 503 before any body, another 5xx, no connection)',
      labelNames: ['model', 'from', 'to'],
      registers,
    }),
    inflight: new Gauge({
      name: 'tollgate_inflight_requests',
      help: 'Requests being served now',
      labelNames: ['endpoint'],
      registers,
    }),
    activeStreams: new Gauge({ name: 'tollgate_active_streams', help: 'Streaming responses open now', registers }),
    clientAborts: new Counter({
      name: 'tollgate_client_aborts_total',
      help: 'Requests the client abandoned before the reply ended',
      labelNames: ['endpoint'],
      registers,
    }),
    storeUp: new Gauge({ name: 'tollgate_store_up', help: '1 when the store (Redis or embedded) answers', registers }),
    traceExportErrors: new Counter({
      name: 'tollgate_trace_export_errors_total',
      help: 'Trace exports (batches of spans) the OTLP endpoint did not take: their spans are lost',
      registers,
    }),
    limiterMode: new Gauge({
      name: 'tollgate_limiter_mode',
      help: '1 for the mode the limiter is in now (redis, insurance, fail_open, fail_closed, memory)',
      labelNames: ['mode'],
      registers,
    }),
    queueDepth: new Gauge({
      name: 'tollgate_queue_depth',
      help: 'Calls and stored requests waiting in line, by model (the same on every instance: it reads the shared lines)',
      labelNames: ['model'],
      registers,
      async collect() {
        const lines = await readQueue()
        if (lines === null) return
        this.reset()
        const depths = new Map<string, number>()
        for (const l of lines) depths.set(l.model, (depths.get(l.model) ?? 0) + l.depth)
        for (const [model, depth] of depths) this.set({ model }, depth)
      },
    }),
    queueHeadAge: new Gauge({
      name: 'tollgate_queue_oldest_wait_seconds',
      help: 'How long the longest-waiting call or stored request at the head of a line has waited, by model (0 when none waits)',
      labelNames: ['model'],
      registers,
      async collect() {
        const lines = await readQueue()
        if (lines === null) return
        this.reset()
        const now = Date.now()
        const oldest = new Map<string, number>()
        for (const l of lines) {
          const waited = l.headJoinedAt === null || l.depth === 0 ? 0 : Math.max(0, (now - l.headJoinedAt) / 1000)
          oldest.set(l.model, Math.max(oldest.get(l.model) ?? 0, waited))
        }
        for (const [model, seconds] of oldest) this.set({ model }, seconds)
      },
    }),
    queueWait: new Histogram({
      name: 'tollgate_queue_wait_seconds',
      help: 'Time in line before admission, by mode (dropin, async)',
      labelNames: ['mode'],
      buckets: WAIT_BUCKETS,
      registers,
    }),
    queueClassWait: new Histogram({
      name: 'tollgate_queue_class_wait_seconds',
      help: 'Time a drop-in call waited in line before admission, by priority class (service_tier)',
      labelNames: ['class'],
      buckets: WAIT_BUCKETS,
      registers,
    }),
    queueWaitPredictionRatio: new Histogram({
      name: 'tollgate_queue_wait_prediction_ratio',
      help: 'Actual over predicted wait of drop-in calls predicted to wait (1: exact; above 1: waited longer than predicted)',
      labelNames: ['class'],
      buckets: [0.1, 0.25, 0.5, 0.75, 0.9, 1.1, 1.25, 1.5, 2, 4, 10],
      registers,
    }),
    fairShareTokens: new Counter({
      name: 'tollgate_fair_share_weighted_tokens_total',
      help: "Tokens served divided by the tier's fair-share weight; under contention the tiers' rates are equal",
      labelNames: ['model', 'tier'],
      registers,
    }),
    fairShareOvertakes: new Counter({
      name: 'tollgate_fair_share_overtakes_total',
      help: 'Calls that went ahead of an earlier one in the capacity line because their party was further below its share',
      labelNames: ['model'],
      registers,
    }),
    outputReservation: new Histogram({
      name: 'tollgate_output_reservation_tokens',
      help: 'Output tokens per reply a call without an output cap reserved on the rate limits, by source: key, tier or model (a learned sketch), fixed',
      labelNames: ['source'],
      buckets: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768],
      registers,
    }),
    queueRequests: new Counter({
      name: 'tollgate_queue_requests_total',
      help: 'Queued requests by mode and how they ended (admitted, completed, failed, cancelled, expired, timeout, left, refused)',
      labelNames: ['mode', 'outcome'],
      registers,
    }),
    queueWorkerUp: new Gauge({
      name: 'tollgate_queue_worker_up',
      help: '1 while this instance runs asynchronous requests',
      registers,
    }),
    queueStarts: new Counter({
      name: 'tollgate_queue_async_starts_total',
      help: 'Admissions of asynchronous requests on this instance, by path: here (leased by the instance that accepted it, started at once) or shared (through the shared queue)',
      labelNames: ['path'],
      registers,
    }),
    queueLeasesRecovered: new Counter({
      name: 'tollgate_queue_leases_recovered_total',
      help: 'Leased asynchronous requests this instance handed to the shared queue because their gateway stopped (or no longer ran them)',
      registers,
    }),
    usageRecovered: new Counter({
      name: 'tollgate_usage_recovered_total',
      help: 'Streams cut by a gateway that stopped (a crash) that this instance charged from the stream journal',
      registers,
    }),
    heapCompactions: new Histogram({
      name: 'tollgate_heap_compaction_seconds',
      help: 'Pauses of the compacting garbage collections run once the gateway is quiet after a burst (server.heapCompaction); none run without --expose-gc',
      buckets: [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    heapCompactionReleased: new Counter({
      name: 'tollgate_heap_compaction_released_bytes_total',
      help: 'Resident memory the compacting collections after bursts handed back',
      registers,
    }),
    ragRequests: new Counter({
      name: 'tollgate_rag_requests_total',
      help: 'RAG gateway requests, by service and status class',
      labelNames: ['service', 'class'],
      registers,
    }),
    ragDuration: new Histogram({
      name: 'tollgate_rag_request_duration_seconds',
      help: 'RAG gateway requests: time from request to the end of the reply, by service',
      labelNames: ['service'],
      buckets: LATENCY_BUCKETS,
      registers,
    }),
    logins: new Counter({
      name: 'tollgate_rag_logins_total',
      help: 'RAG gateway logins, by outcome (success, invalid_credentials, throttled, invalid_body)',
      labelNames: ['outcome'],
      registers,
    }),
    tokenRefreshes: new Counter({
      name: 'tollgate_rag_token_refreshes_total',
      help: 'RAG gateway refresh-token uses, by outcome (rotated, repeated within the reuse window, reused, invalid)',
      labelNames: ['outcome'],
      registers,
    }),
    setQueueSource(source) {
      queueSource = source
    },
    queueCapacityWaiting: new Gauge({
      name: 'tollgate_queue_capacity_waiting',
      help: 'Calls of this gateway waiting for a deployment of their model to have room (the capacity line; per instance, unlike tollgate_queue_depth)',
      registers,
      collect() {
        if (capacityLineSource !== null) this.set(capacityLineSource())
      },
    }),
    setCapacityLineSource(source) {
      capacityLineSource = source
    },
    signingKeyExpiry: new Gauge({
      name: 'tollgate_jwt_signing_key_expiry_timestamp_seconds',
      help: "When the RAG gateway's JWT signing key that signs now (kid: its public id, as in the JWKS) reaches the end of its planned life (Unix seconds); a successor normally takes over well before",
      // Labelled, so that no key (none read yet) means no sample rather than a 0 that would read as long expired.
      labelNames: ['kid'],
      registers,
      collect() {
        const key = signingKeySource?.() ?? null
        this.reset()
        if (key !== null) this.set({ kid: key.kid }, key.expiresAt / 1000)
      },
    }),
    setSigningKeySource(source) {
      signingKeySource = source
    },
    deploymentRemainingRequests: deploymentGauge(
      'tollgate_deployment_remaining_requests',
      'Requests a deployment has left in its window: the tighter of its declared rpm and what its upstream last said',
      (r) => r.remainingRequests,
    ),
    deploymentRemainingTokens: deploymentGauge(
      'tollgate_deployment_remaining_tokens',
      'Tokens a deployment has left in its window: the tighter of its declared tpm and what its upstream last said',
      (r) => r.remainingTokens,
    ),
    deploymentInflight: deploymentGauge(
      'tollgate_deployment_inflight',
      'Calls in flight on a deployment, across every instance (counted for deployments with maxConcurrent)',
      (r) => r.inFlight,
    ),
    deploymentCoolingDown: deploymentGauge(
      'tollgate_deployment_cooling_down',
      '1 while a deployment cools down after a 429 or 503 (no call is sent to it), else 0',
      (r, now) => (coolingLeft(r, now) > 0 ? 1 : 0),
    ),
    deploymentCooldownSeconds: deploymentGauge(
      'tollgate_deployment_cooldown_seconds',
      "Seconds left of a deployment's cooldown (0 when none)",
      coolingLeft,
    ),
    setCapacitySource(source) {
      capacitySource = source
    },
  }
}
