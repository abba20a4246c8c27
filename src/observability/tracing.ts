// Traces (issue #26): the port every room records its spans through, and the no-op the
// gateway runs with when traces are off. Nothing here imports OpenTelemetry: main.ts loads
// the SDK's adapter (otel.ts) only when tracing.enabled, so a gateway without traces pays
// a call to an empty method per step, and none of the SDK is even loaded.
//
// The spans of one call: the call's own (SERVER, or CONSUMER for a stored request a worker
// runs), and under it one for admission, one per upstream attempt (CLIENT; its context is
// what the upstream receives as traceparent) and one for settlement. A RAG request has the
// request's span and one CLIENT span for its backend. Parents are passed explicitly: no
// context manager is needed across the corridor's awaits.

export type SpanValue = string | number | boolean
export type SpanAttributes = Readonly<Record<string, SpanValue | undefined>>

/** W3C trace context, as headers: a span named as the parent across a process (or a wait in a queue). */
export interface TraceHeaders {
  readonly traceparent?: string
  readonly tracestate?: string
}

export interface Span {
  /** False for the no-op: nothing is recorded, so nothing need be worked out for it. */
  readonly recording: boolean
  /** The trace's id (32 hex digits) when recorded. */
  readonly traceId: string | undefined
  /** Prompts and completions may be recorded in it (tracing.captureContent). */
  readonly captureContent: boolean
  set(attributes: SpanAttributes): void
  rename(name: string): void
  /** A step of this span: admission, an upstream attempt, settlement, a RAG backend. */
  child(name: string, kind: 'internal' | 'client', attributes?: SpanAttributes): Span
  /** The headers naming this span as parent: sent upstream, stored with an accepted request. */
  headers(): TraceHeaders
  /** Marks the span failed; `type` is the error table's name (or a status) and becomes error.type. */
  fail(type: string, message?: string): void
  end(): void
}

export interface StartOptions {
  readonly kind: 'server' | 'consumer'
  /** The client's traceparent/tracestate, or the one stored with a queued request. */
  readonly parent?: TraceHeaders
  /** The span this one follows from: the one that accepted a stored request. */
  readonly link?: TraceHeaders
  readonly attributes?: SpanAttributes
}

export interface Tracing {
  readonly enabled: boolean
  /** Prompts and completions go in spans (gen_ai.input/output.messages) only when this is set (tracing.captureContent). */
  readonly captureContent: boolean
  start(name: string, options: StartOptions): Span
  /** Exports what is still buffered, then stops: awaited at shutdown. */
  shutdown(): Promise<void>
}

export const NO_SPAN: Span = {
  recording: false,
  traceId: undefined,
  captureContent: false,
  set: () => {},
  rename: () => {},
  child: () => NO_SPAN,
  headers: () => ({}),
  fail: () => {},
  end: () => {},
}

export const NO_TRACING: Tracing = {
  enabled: false,
  captureContent: false,
  start: () => NO_SPAN,
  shutdown: async () => {},
}

/** The W3C headers a client sent (the first of each; anything else is not a trace context). */
export function traceHeadersOf(headers: Readonly<Record<string, string | string[] | undefined>>): TraceHeaders {
  const parent = first(headers.traceparent)
  if (parent === undefined) return {}
  const state = first(headers.tracestate)
  return state === undefined ? { traceparent: parent } : { traceparent: parent, tracestate: state }
}

const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}/

/** The trace id a traceparent names, when it is well formed (and not the all-zero invalid id). */
export function traceIdOf(traceparent: string | string[] | undefined): string | undefined {
  const header = first(traceparent)
  if (header === undefined) return undefined
  const id = TRACEPARENT.exec(header)?.[1]
  return id === undefined || /^0+$/.test(id) ? undefined : id
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}
