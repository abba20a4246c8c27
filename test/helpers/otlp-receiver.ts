// An OTLP/HTTP trace receiver for tests: a loopback server that takes what an exporter
// POSTs to /v1/traces (protobuf) and decodes it with the official opentelemetry-proto
// definitions (vendored in test/fixtures/opentelemetry-proto), read by protobufjs.
import { createServer, type Server } from 'node:http'
import { join } from 'node:path'
import protobuf from 'protobufjs'

const PROTO_ROOT = join(import.meta.dirname, '../fixtures/opentelemetry-proto')

export type AttributeValue = string | number | boolean | null

export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  /** '' for a root span. */
  readonly parentSpanId: string
  readonly name: string
  /** The protocol's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number
  readonly attributes: Readonly<Record<string, AttributeValue>>
  readonly links: ReadonlyArray<{ readonly traceId: string; readonly spanId: string }>
  /** 0 unset, 1 ok, 2 error. */
  readonly statusCode: number
  readonly resource: Readonly<Record<string, AttributeValue>>
}

export const KIND = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 } as const

export interface OtlpReceiver {
  readonly url: string
  /** Every span received so far. */
  spans(): readonly ReceivedSpan[]
  /** Waits (bounded) until `found` returns something for the spans received so far. */
  waitFor<T>(found: (spans: readonly ReceivedSpan[]) => T | undefined, what: string, timeoutMs?: number): Promise<T>
  /** Requests that were not an OTLP protobuf trace export. */
  readonly rejected: string[]
  close(): Promise<void>
}

interface AnyValue {
  stringValue?: string
  boolValue?: boolean
  intValue?: string | number
  doubleValue?: number
}
interface KeyValue {
  key: string
  value?: AnyValue
}

/** On `port` (a receiver that comes up where a gateway already exports), else on a free one. */
export async function startOtlpReceiver(port = 0): Promise<OtlpReceiver> {
  const root = new protobuf.Root()
  root.resolvePath = (_origin, target) => join(PROTO_ROOT, target)
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto')
  const request = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest')
  const response = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse')
  const received: ReceivedSpan[] = []
  const rejected: string[] = []
  const waiters = new Set<() => void>()

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      if (
        req.method !== 'POST' ||
        req.url !== '/v1/traces' ||
        req.headers['content-type'] !== 'application/x-protobuf'
      ) {
        rejected.push(`${req.method} ${req.url} ${req.headers['content-type']}`)
        res.writeHead(400).end()
        return
      }
      const decoded = request.toObject(request.decode(Buffer.concat(chunks)), { longs: String })
      received.push(...spansOf(decoded))
      res.writeHead(200, { 'content-type': 'application/x-protobuf' })
      res.end(Buffer.from(response.encode(response.create({})).finish()))
      for (const wake of waiters) wake()
    })
  })
  await new Promise<void>((done) => server.listen(port, '127.0.0.1', done))
  const bound = (server.address() as { port: number }).port

  return {
    url: `http://127.0.0.1:${bound}`,
    spans: () => received,
    rejected,
    async waitFor(found, what, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const result = found(received)
        if (result !== undefined) return result
        const left = deadline - Date.now()
        if (left <= 0) throw new Error(`no ${what} among ${received.length} spans: ${names(received)}`)
        // Woken by the next export, or at the deadline.
        await new Promise<void>((done) => {
          const wake = (): void => {
            clearTimeout(timer)
            waiters.delete(wake)
            done()
          }
          const timer = setTimeout(wake, left)
          waiters.add(wake)
        })
      }
    },
    close: () => new Promise<void>((done) => server.close(() => done())),
  }
}

function names(spans: readonly ReceivedSpan[]): string {
  return spans.map((s) => s.name).join(', ')
}

const hex = (bytes: Uint8Array | undefined): string => Buffer.from(bytes ?? []).toString('hex')

function attributesOf(list: readonly KeyValue[] | undefined): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {}
  for (const { key, value = {} } of list ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? value.boolValue ?? null))
  }
  return out
}

interface DecodedSpan {
  traceId: Uint8Array
  spanId: Uint8Array
  parentSpanId?: Uint8Array
  name: string
  kind?: number
  attributes?: KeyValue[]
  links?: Array<{ traceId: Uint8Array; spanId: Uint8Array }>
  status?: { code?: number }
}

function spansOf(decoded: Record<string, unknown>): ReceivedSpan[] {
  const out: ReceivedSpan[] = []
  const resourceSpans = decoded.resourceSpans as
    | Array<{
        resource?: { attributes?: KeyValue[] }
        scopeSpans?: Array<{ spans?: DecodedSpan[] }>
      }>
    | undefined
  for (const rs of resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes)
    for (const scope of rs.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        out.push({
          traceId: hex(span.traceId),
          spanId: hex(span.spanId),
          parentSpanId: hex(span.parentSpanId),
          name: span.name,
          kind: span.kind ?? 0,
          attributes: attributesOf(span.attributes),
          links: (span.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
          statusCode: span.status?.code ?? 0,
          resource,
        })
      }
    }
  }
  return out
}
