// The Tracing port (tracing.ts) on the official OpenTelemetry SDK, exported as OTLP/HTTP
// protobuf. main.ts imports this module only when tracing.enabled, so the SDK is never
// loaded otherwise. The SDK reads the standard variables itself: OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (and _HEADERS, _TIMEOUT), OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default
// parentbased_always_on), OTEL_BSP_* for the batch processor.
// No global is registered: each span is started from an explicit parent context, so
// nothing depends on a context manager following the corridor's awaits, and nothing else
// in the process (a library with its own instrumentation) is changed by turning traces on.
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  defaultTextMapGetter,
  defaultTextMapSetter,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span as OtelSpan,
} from '@opentelemetry/api'
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources'
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { Logger } from './logger.ts'
import type { Metrics } from './metrics.ts'
import { createTaskOutage } from './outage-log.ts'
import type { Span, SpanAttributes, StartOptions, TraceHeaders, Tracing } from './tracing.ts'

export interface OtelOptions {
  readonly captureContent: boolean
  /** The service.name when OTEL_SERVICE_NAME does not set one. */
  readonly serviceName: string
  readonly serviceVersion: string
  /** Where a failed export is said: once when exports start failing, once when they work again. */
  readonly log: Logger
  readonly metrics: Pick<Metrics, 'traceExportErrors'>
}

const KINDS = {
  server: SpanKind.SERVER,
  consumer: SpanKind.CONSUMER,
  client: SpanKind.CLIENT,
  internal: SpanKind.INTERNAL,
} as const

export function createOtelTracing(options: OtelOptions): Tracing {
  // Later resources win: our name and version, then what the environment says.
  const resource = defaultResource()
    .merge(
      resourceFromAttributes({
        [ATTR_SERVICE_NAME]: options.serviceName,
        [ATTR_SERVICE_VERSION]: options.serviceVersion,
      }),
    )
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(observed(new OTLPTraceExporter(), options))],
  })
  const tracer = provider.getTracer('tollgate', options.serviceVersion)
  const propagator = new W3CTraceContextPropagator()
  const contextOf = (headers: TraceHeaders | undefined): Context =>
    headers?.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter)

  const wrap = (span: OtelSpan): Span => {
    const recording = span.isRecording()
    // A trace nobody will see is not named in the logs either.
    const traceId = recording ? span.spanContext().traceId : undefined
    return {
      // A span the sampler dropped is not recorded: the steps under it are not made at all
      // (and the client's own trace context goes upstream as it came).
      recording,
      traceId,
      captureContent: options.captureContent,
      set: (attributes) => span.setAttributes(defined(attributes)),
      rename: (name) => span.updateName(name),
      child: (name, kind, attributes) =>
        wrap(
          tracer.startSpan(
            name,
            { kind: KINDS[kind], ...(attributes === undefined ? {} : { attributes: defined(attributes) }) },
            trace.setSpan(ROOT_CONTEXT, span),
          ),
        ),
      headers: () => {
        const carrier: Record<string, string> = {}
        propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter)
        return carrier
      },
      fail: (type, message) => {
        span.setAttribute('error.type', type)
        span.setStatus({ code: SpanStatusCode.ERROR, ...(message === undefined ? {} : { message }) })
      },
      end: () => span.end(),
    }
  }

  return {
    enabled: true,
    captureContent: options.captureContent,
    start(name: string, start: StartOptions): Span {
      const links: Link[] = []
      const linked = start.link === undefined ? undefined : trace.getSpanContext(contextOf(start.link))
      if (linked !== undefined) links.push({ context: linked })
      return wrap(
        tracer.startSpan(
          name,
          {
            kind: KINDS[start.kind],
            links,
            ...(start.attributes === undefined ? {} : { attributes: defined(start.attributes) }),
          },
          contextOf(start.parent),
        ),
      )
    },
    shutdown: () => provider.shutdown(),
  }
}

/**
 * The exporter with its failures made visible: the SDK drops a batch the endpoint did not
 * take and says nothing (no diag logger is registered). Each failed export is counted, and an
 * outage of the receiver is one warning when it starts and one line when it is over.
 */
function observed(exporter: SpanExporter, { log, metrics }: Pick<OtelOptions, 'log' | 'metrics'>): SpanExporter {
  const outage = createTaskOutage(log, 'traces: export to the OTLP endpoint')
  return {
    export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
      exporter.export(spans, (result) => {
        if (result.code === ExportResultCode.SUCCESS) outage.succeeded()
        else {
          metrics.traceExportErrors.inc()
          outage.failed(result.error ?? new Error('the export failed'))
        }
        done(result)
      })
    },
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush?.() ?? Promise.resolve(),
  }
}

function defined(attributes: SpanAttributes): Attributes {
  const out: Attributes = {}
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined) out[name] = value
  return out
}
