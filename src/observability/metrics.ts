// Prometheus metrics, in their own registry (no global state), served on METRICS_PORT.
// Labels never carry a key id or anything a client chose freely: model names are only
// recorded when configured, so cardinality stays bounded.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]

export interface Metrics {
  readonly registry: Registry
  readonly requests: Counter<'endpoint' | 'model' | 'status'>
  readonly requestDuration: Histogram<'endpoint' | 'model'>
  readonly upstreamDuration: Histogram<'backend' | 'endpoint'>
  readonly timeToFirstByte: Histogram<'backend' | 'endpoint'>
  readonly tokens: Counter<'model' | 'tier' | 'direction'>
  readonly cost: Counter<'model' | 'tier'>
  readonly rateLimited: Counter<'model' | 'tier' | 'reason'>
  readonly upstreamErrors: Counter<'backend' | 'reason'>
  readonly failovers: Counter<'backend'>
  readonly inflight: Gauge<'endpoint'>
  readonly activeStreams: Gauge
  readonly clientAborts: Counter<'endpoint'>
  readonly storeUp: Gauge
  readonly limiterMode: Gauge<'mode'>
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): Metrics {
  const registry = new Registry()
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'tollgate_' })
  const registers = [registry]
  return {
    registry,
    requests: new Counter({ name: 'tollgate_requests_total', help: 'Requests answered, by endpoint, model and HTTP status', labelNames: ['endpoint', 'model', 'status'], registers }),
    requestDuration: new Histogram({ name: 'tollgate_request_duration_seconds', help: 'Time from request to the end of the reply', labelNames: ['endpoint', 'model'], buckets: LATENCY_BUCKETS, registers }),
    upstreamDuration: new Histogram({ name: 'tollgate_upstream_duration_seconds', help: 'Time spent on the upstream call, body included', labelNames: ['backend', 'endpoint'], buckets: LATENCY_BUCKETS, registers }),
    timeToFirstByte: new Histogram({ name: 'tollgate_upstream_ttfb_seconds', help: 'Time until the upstream sent its first body byte', labelNames: ['backend', 'endpoint'], buckets: LATENCY_BUCKETS, registers }),
    tokens: new Counter({ name: 'tollgate_tokens_total', help: 'Tokens that flowed, by direction (input or output)', labelNames: ['model', 'tier', 'direction'], registers }),
    cost: new Counter({ name: 'tollgate_cost_total', help: 'Metered cost in plan currency units', labelNames: ['model', 'tier'], registers }),
    rateLimited: new Counter({ name: 'tollgate_rate_limited_total', help: 'Requests refused with 429, by the limit that refused them', labelNames: ['model', 'tier', 'reason'], registers }),
    upstreamErrors: new Counter({ name: 'tollgate_upstream_errors_total', help: 'Upstream failures (unreachable, timeout, 5xx)', labelNames: ['backend', 'reason'], registers }),
    failovers: new Counter({ name: 'tollgate_failovers_total', help: 'Calls moved to another deployment after a failure', labelNames: ['backend'], registers }),
    inflight: new Gauge({ name: 'tollgate_inflight_requests', help: 'Requests being served now', labelNames: ['endpoint'], registers }),
    activeStreams: new Gauge({ name: 'tollgate_active_streams', help: 'Streaming responses open now', registers }),
    clientAborts: new Counter({ name: 'tollgate_client_aborts_total', help: 'Requests the client abandoned before the reply ended', labelNames: ['endpoint'], registers }),
    storeUp: new Gauge({ name: 'tollgate_store_up', help: '1 when the store (Redis or embedded) answers', registers }),
    limiterMode: new Gauge({ name: 'tollgate_limiter_mode', help: '1 for the mode the limiter is in now (redis, insurance, fail_open, fail_closed, memory)', labelNames: ['mode'], registers }),
  }
}
