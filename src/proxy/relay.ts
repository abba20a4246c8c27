// Relays an upstream response to the client and taps its token usage on the way: the
// one place in the gateway where usage is computed. JSON is read whole (up to a limit),
// so the gateway can filter or record it before the client sees it; it is parsed only
// when something needs more than its usage and model (reply-scan.ts reads those from its
// ends), and past the limit it streams through, its usage read from its last bytes. Server-sent events
// go through one by one as they arrive; anything else is piped untouched, except an
// error status whose body is not JSON, which the client gets in the contract's shape.
//
// relay() does not throw once it has the upstream response: whatever goes wrong (the
// upstream dies mid-body, the client leaves, transformJson refuses) is answered to the
// client as well as it still can be, and reported in the outcome.
import { NO_USAGE, type UpstreamResponse, type Usage } from '../backends/port.ts'
import { type GatewayError, gatewayError, toGatewayError } from '../errors.ts'
import { isJsonType, mediaType } from '../http/media-type.ts'
import { statusWithReason } from '../http/status.ts'
import { countTextTokens } from '../tokenizer/tokens.ts'
import { ClientSink } from './client-sink.ts'
import type { ReplySink } from './reply-sink.ts'
import { withErrorDetail } from './error-detail.ts'
import { asShown } from './public-model.ts'
import { copyUpstreamHeaders } from './response-headers.ts'
import { SseParser, type SseEvent } from './sse.ts'
import { scanReply, TailWindow, usageInTail } from './reply-scan.ts'
import {
  bodyText,
  bodyUsage,
  isGeneration,
  isStreamChunk,
  readEvent,
  usageChunk,
  hasNullUsage,
  withoutNullUsage,
} from './usage-tap.ts'

export interface RelayOptions {
  /** The client asked for a stream: an upstream reply without a content type is then read as SSE. */
  readonly stream: boolean
  /** The client set stream_options.include_usage itself; otherwise the usage-only chunk the gateway asked for is hidden. */
  readonly clientWantsUsage: boolean
  /**
   * The prompt's tokens, charged as input when the reply reports no usage (a stream the
   * client cut off, a server that leaves usage out). Called only then.
   */
  readonly promptTokens: () => Promise<number>
  /** Largest JSON body read to tap it; a larger one is streamed through untouched. */
  readonly jsonLimitBytes: number
  /** Fires when the client is gone or the gateway gives up. */
  readonly signal: AbortSignal
  /**
   * Called with every parsed JSON body before the client sees it. Its result is what the
   * client gets (undefined: the original bytes). A GatewayError it throws is the reply.
   * When it is given, a body that cannot be parsed or is over the limit is refused
   * (upstream_bad_response) rather than passed through unchecked.
   */
  readonly transformJson?: (status: number, body: unknown) => Promise<unknown>
  /** A stream whose client takes nothing for this long is ended (see ClientSink). */
  readonly idleReaderMs?: number
  /**
   * The model name the client asked for. Where the reply names a model (JSON bodies and
   * stream events), the upstream's name for its deployment is replaced by this one.
   */
  readonly publicModel?: string
  /** The service tier (priority class) that served the call, where the reply names one; absent: the upstream's. */
  readonly serviceTier?: string
  /**
   * Called once, with the reply's usage, when the reply is complete but before its last
   * bytes go out (a JSON body; a stream's `[DONE]`, or its end when it has none), so that
   * what a client received whole has been metered even if the gateway dies right after,
   * and what it did not receive whole has not. Not called for a reply that broke off or
   * that the client left. (Metered: its writes have left the process, not necessarily been
   * answered by the store; inference/reply.ts.)
   */
  readonly commit?: (usage: Usage) => Promise<void>
  /** Shown every parsed JSON body, and every stream event's parsed data, before the client sees it. */
  readonly observe?: (data: unknown) => void
  /**
   * A stream's generated text, each time some of it has been written to the client (so a
   * journal can keep what a crash would otherwise lose). Called often: it must be cheap.
   */
  readonly delivered?: (text: string) => void
  /** A stream's events pass through this (held back, checked) before the client sees them. */
  readonly gate?: StreamGate
}

/**
 * Holds a stream's events back while it checks their text (guardrails/reply-check.ts): given
 * each event's bytes and text, what may be written now, or the error that ends the stream.
 */
export interface StreamGate {
  push(bytes: string, text: string): string | GatewayError
  /** The stream is complete: the rest, or the error. */
  end(): string | GatewayError
  /** The characters of the stream's text let go so far: what `delivered` is told (held text is not the client's). */
  sent(): number
}

export type UsageSource = 'reported' | 'counted' | 'none'

export interface RelayOutcome {
  /** The status the client got. */
  readonly status: number
  readonly usage: Usage
  readonly usageSource: UsageSource
  /** The client left (or the signal fired) before the reply was complete. */
  readonly aborted: boolean
  /** Body bytes written to the client. */
  readonly bytes: number
  /** From relay() being called to the first body byte written. */
  readonly firstByteMs?: number
  /** What went wrong after the upstream answered, for the log. */
  readonly error?: GatewayError
  /** The client stopped reading and the reply was ended for it (idleReaderMs). */
  readonly stalled?: true
}

interface Tapped {
  readonly usage: Usage
  readonly usageSource: UsageSource
}

const NONE: Tapped = { usage: NO_USAGE, usageSource: 'none' }

/** How an event whose last member is `usage: null` ends, as JSON.stringify writes it. */
const NULL_USAGE_TAIL = ',"usage":null}'

export async function relay(res: ReplySink, upstream: UpstreamResponse, options: RelayOptions): Promise<RelayOutcome> {
  const body = upstream.body
  const sink = new ClientSink(res, options.signal, () => body.destroy(), options.idleReaderMs)
  const chunks = body[Symbol.asyncIterator]() as AsyncIterator<Buffer>
  try {
    switch (kindOf(upstream, options)) {
      case 'sse':
        return await relaySse(res, upstream, options, sink, chunks)
      case 'json':
        return await relayJson(res, upstream, options, sink, chunks)
      case 'opaque': {
        if (upstream.status >= 400) return unreadableError(res, upstream, sink)
        startReply(res, upstream, false)
        const error = await pipeRest(sink, chunks, [], () => commit(options, NONE.usage))
        return finish(upstream.status, sink, NONE, { error })
      }
    }
  } finally {
    sink.dispose()
  }
}

function kindOf(upstream: UpstreamResponse, options: RelayOptions): 'sse' | 'json' | 'opaque' {
  // A compressed body cannot be tapped; the adapters ask for identity, so this is rare.
  const encoding = upstream.headers['content-encoding']
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') return 'opaque'
  const contentType = upstream.headers['content-type']
  const type = mediaType(contentType)
  if (type === 'text/event-stream') return 'sse'
  if (isJsonType(type)) return 'json'
  if (contentType === undefined && options.stream && upstream.status < 300) return 'sse'
  return 'opaque'
}

function startReply(res: ReplySink, upstream: UpstreamResponse, rewritten: boolean): void {
  if (res.headersSent) return
  copyUpstreamHeaders(res, upstream.headers, rewritten)
  res.statusCode = upstream.status
  const length = upstream.headers['content-length']
  if (!rewritten && length !== undefined && /^\d+$/.test(length)) res.setHeader('content-length', length)
}

function finish(
  status: number,
  sink: ClientSink,
  tapped: Tapped,
  extra: { error?: GatewayError | undefined } = {},
): RelayOutcome {
  return {
    status,
    usage: tapped.usage,
    usageSource: tapped.usageSource,
    aborted: sink.aborted,
    bytes: sink.bytes,
    ...(sink.firstByteMs === undefined ? {} : { firstByteMs: sink.firstByteMs }),
    ...(extra.error === undefined ? {} : { error: extra.error }),
    ...(sink.stalled ? { stalled: true } : {}),
  }
}

function upstreamError(err: unknown): GatewayError {
  const error = toGatewayError(err)
  return error.errorName === 'internal' ? gatewayError('upstream_bad_response', { cause: err }) : error
}

/** Before anything was written: the client gets an error reply in OpenAI's shape. */
function replyError(res: ReplySink, sink: ClientSink, error: GatewayError): void {
  if (res.headersSent) {
    sink.cut()
    return
  }
  const payload = JSON.stringify(error.toBody())
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value)
  res.statusCode = error.status
  res.setHeader('content-type', 'application/json; charset=utf-8')
  res.setHeader('content-length', Buffer.byteLength(payload))
  sink.end(payload)
}

/** `chunks`, showing each to `see` as it goes by. */
function tapping(chunks: AsyncIterator<Buffer>, see: (chunk: Buffer) => void): AsyncIterator<Buffer> {
  return {
    async next() {
      const next = await chunks.next()
      if (next.done !== true) see(next.value)
      return next
    },
  }
}

/** Writes `prefix` and the rest of the body untouched. Returns the upstream's error if it broke off. */
async function pipeRest(
  sink: ClientSink,
  chunks: AsyncIterator<Buffer>,
  prefix: readonly Buffer[],
  beforeEnd?: () => Promise<void>,
): Promise<GatewayError | undefined> {
  for (const chunk of prefix) await sink.write(chunk)
  try {
    while (!sink.aborted) {
      const next = await chunks.next()
      if (next.done === true) break
      await sink.write(next.value)
    }
  } catch (err) {
    if (sink.aborted) return undefined
    // The status line already promised a whole body: cutting the connection is the only
    // honest way to tell the client this one is not.
    sink.cut()
    return upstreamError(err)
  }
  if (!sink.aborted) await beforeEnd?.()
  sink.end()
  return undefined
}

/** options.commit, at most once per relay (the options object is the relay's own). */
const committed = new WeakSet<RelayOptions>()
async function commit(options: RelayOptions, usage: Usage): Promise<void> {
  if (options.commit === undefined || committed.has(options)) return
  committed.add(options)
  await options.commit(usage)
}

async function counted(options: RelayOptions, text: string): Promise<Tapped> {
  const [inputTokens, outputTokens] = await Promise.all([options.promptTokens(), countTextTokens(text)])
  return { usage: { inputTokens, outputTokens }, usageSource: 'counted' }
}

/** A client that left before a JSON reply was read whole: the upstream did the work, so its input is charged. */
async function walkedAway(status: number, options: RelayOptions): Promise<Tapped> {
  return status < 400 ? counted(options, '') : NONE
}

async function tapJson(status: number, parsed: unknown, options: RelayOptions): Promise<Tapped> {
  const usage = bodyUsage(parsed)
  if (usage !== undefined) return { usage, usageSource: 'reported' }
  // Some servers leave usage out of a generation: count what it produced.
  if (status < 300 && isGeneration(parsed)) return counted(options, bodyText(parsed))
  return NONE
}

async function relayJson(
  res: ReplySink,
  upstream: UpstreamResponse,
  options: RelayOptions,
  sink: ClientSink,
  chunks: AsyncIterator<Buffer>,
): Promise<RelayOutcome> {
  const { status } = upstream
  const declared = Number(upstream.headers['content-length'])
  let overLimit = Number.isFinite(declared) && declared > options.jsonLimitBytes
  const read: Buffer[] = []
  let size = 0
  try {
    while (!overLimit && !sink.aborted) {
      const next = await chunks.next()
      if (next.done === true) break
      read.push(next.value)
      size += next.value.length
      overLimit = size > options.jsonLimitBytes
    }
  } catch (err) {
    if (sink.aborted) return finish(status, sink, await walkedAway(status, options))
    const error = upstreamError(err)
    replyError(res, sink, error)
    return finish(error.status, sink, NONE, { error })
  }
  if (sink.aborted) return finish(status, sink, await walkedAway(status, options))

  if (overLimit) {
    if (options.transformJson !== undefined) return refuseUnchecked(res, upstream, sink, 'too large to check')
    startReply(res, upstream, false)
    // Too large to read whole: its usage, if any, is read from its last bytes as they pass.
    const tail = new TailWindow()
    for (const chunk of read) tail.push(chunk)
    let tapped = NONE
    const error = await pipeRest(
      sink,
      tapping(chunks, (chunk) => tail.push(chunk)),
      read,
      async () => {
        const usage = status < 300 ? usageInTail(tail.bytes()) : undefined
        if (usage !== undefined) tapped = { usage, usageSource: 'reported' }
        await commit(options, tapped.usage)
      },
    )
    return finish(status, sink, tapped, { error })
  }

  const bytes = Buffer.concat(read, size)
  // Most replies need no more than their usage and model: read from the ends, not parsed whole.
  const scanned =
    status < 300 && options.transformJson === undefined && options.observe === undefined ? scanReply(bytes) : undefined
  if (
    scanned !== undefined &&
    (options.publicModel === undefined || scanned.model === null || scanned.model === options.publicModel) &&
    options.serviceTier === undefined
  ) {
    const tapped: Tapped = { usage: scanned.usage, usageSource: 'reported' }
    startReply(res, upstream, false)
    if (!res.headersSent) res.setHeader('content-length', bytes.length)
    await commit(options, tapped.usage)
    sink.end(bytes)
    return finish(status, sink, tapped)
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString('utf8'))
  } catch {
    if (status >= 400) return unreadableError(res, upstream, sink)
    if (options.transformJson !== undefined) return refuseUnchecked(res, upstream, sink, 'not valid JSON')
    startReply(res, upstream, false)
    await commit(options, NONE.usage)
    sink.end(bytes)
    return finish(status, sink, NONE)
  }

  options.observe?.(parsed)
  const tapped = await tapJson(status, parsed, options)
  const renamed = withErrorDetail(status, asShown(parsed, options.publicModel, options.serviceTier))
  let payload = renamed === parsed ? bytes : Buffer.from(JSON.stringify(renamed), 'utf8')
  if (options.transformJson !== undefined) {
    try {
      const transformed = await options.transformJson(status, renamed)
      if (transformed !== undefined) payload = Buffer.from(JSON.stringify(transformed), 'utf8')
    } catch (err) {
      const error = toGatewayError(err)
      replyError(res, sink, error)
      return finish(error.status, sink, tapped, { error })
    }
  }
  startReply(res, upstream, payload !== bytes)
  if (!res.headersSent) res.setHeader('content-length', payload.length)
  await commit(options, tapped.usage)
  sink.end(payload)
  return finish(status, sink, tapped)
}

/**
 * An upstream error with a body that is not JSON (Node's bare 431, an HTML page from a
 * proxy in front of the model server): the status is kept, since it still says what went
 * wrong, and the body is the contract's, so SDKs can read it. The upstream's text stays
 * out of the reply: it may describe the upstream's insides.
 */
function unreadableError(res: ReplySink, upstream: UpstreamResponse, sink: ClientSink): RelayOutcome {
  upstream.body.destroy()
  const { status } = upstream
  const retryAfter = upstream.headers['retry-after']
  const error = gatewayError('upstream_error_status', {
    status,
    ...(retryAfter === undefined ? {} : { headers: { 'retry-after': retryAfter } }),
    message: `The upstream model server answered ${statusWithReason(status)} without an error body the gateway could read.`,
  })
  replyError(res, sink, error)
  return finish(error.status, sink, NONE, { error })
}

function refuseUnchecked(res: ReplySink, upstream: UpstreamResponse, sink: ClientSink, why: string): RelayOutcome {
  upstream.body.destroy()
  const error = gatewayError('upstream_bad_response', {
    message: `The upstream model server sent a response that is ${why}.`,
  })
  replyError(res, sink, error)
  return finish(error.status, sink, NONE, { error })
}

async function relaySse(
  res: ReplySink,
  upstream: UpstreamResponse,
  options: RelayOptions,
  sink: ClientSink,
  chunks: AsyncIterator<Buffer>,
): Promise<RelayOutcome> {
  const { status } = upstream
  if (!sink.aborted) {
    startReply(res, upstream, true)
    if (!res.hasHeader('content-type')) res.setHeader('content-type', 'text/event-stream; charset=utf-8')
    if (!res.hasHeader('cache-control')) res.setHeader('cache-control', 'no-cache')
    // Reverse proxies in front of the gateway (nginx) must not buffer the stream either.
    res.setHeader('x-accel-buffering', 'no')
    // The headers leave with the first events when those are already here (one write, not
    // two); otherwise on the next turn of the event loop, so a slow first token never
    // holds them back.
    setImmediate(() => {
      if (!res.headersSent && !sink.aborted) res.flushHeaders()
    })
    // Each event is one small write; Nagle would hold it back waiting for the next.
    res.socket?.setNoDelay(true)
  }

  const parser = new SseParser()
  let reported: Usage | undefined
  const text: string[] = []
  /** The last chunk the client got, whose shape a usage chunk of the gateway's own copies. */
  let lastChunk: Record<string, unknown> | undefined
  /** Every event so far reported an error (undefined: none yet): the upstream did no work. */
  let onlyErrors: boolean | undefined
  let trailed = false
  /** The usage chunk, once, for a client that asked for usage when the upstream sent none. */
  const usageTrailer = (usage: Tapped): string => {
    if (trailed || !options.clientWantsUsage || usage.usageSource !== 'counted' || lastChunk === undefined) return ''
    trailed = true
    return `data: ${JSON.stringify(usageChunk(lastChunk, usage.usage))}\n\n`
  }
  const { gate } = options
  /** The error a gate ended the stream with; nothing more is written. */
  let gated: GatewayError | undefined
  /** An event's bytes as the gate lets them go ('' while held); all of them when there is none. */
  /** With a gate: the text given to it that `delivered` has not been told of yet, from offset `toldUpTo`. */
  let untold = ''
  let toldUpTo = 0
  /** Tells `delivered` the text the client has now: all of it, or with a gate what the gate let go. */
  const tell = (from: number): void => {
    if (options.delivered === undefined || sink.aborted) return
    if (gate === undefined) {
      for (let i = from; i < text.length; i++) options.delivered(text[i] ?? '')
      return
    }
    const upTo = gate.sent()
    if (upTo <= toldUpTo) return
    options.delivered(untold.slice(0, upTo - toldUpTo))
    untold = untold.slice(upTo - toldUpTo)
    toldUpTo = upTo
  }
  const pass = (bytes: string, eventText: string): string => {
    if (gate === undefined || gated !== undefined) return gated === undefined ? bytes : ''
    untold += eventText
    const out = gate.push(bytes, eventText)
    if (typeof out === 'string') return out
    gated = out
    return ''
  }
  /** What an event other than `[DONE]` adds to the client's bytes, tallied on the way ('' for one it must not see). */
  const shownOf = (event: SseEvent): string => {
    if (event.data === undefined) return pass(event.raw, '')
    let data: unknown
    try {
      data = JSON.parse(event.data)
    } catch {
      data = undefined
    }
    options.observe?.(data)
    const reading = readEvent(data)
    if (reading.usage !== undefined) reported = reading.usage
    if (reading.text.length > 0) text.push(reading.text)
    const eventText = reading.text
    onlyErrors = (onlyErrors ?? true) && reading.error
    // The gateway asked for this chunk for itself; a client that did not ask would
    // trip over a chunk with no choices.
    if (reading.usageOnly && !options.clientWantsUsage) return ''
    const renamed = asShown(data, options.publicModel, options.serviceTier)
    if (isStreamChunk(renamed)) lastChunk = renamed
    // Upstreams put "usage": null on every chunk once usage is asked for; the client
    // did not ask, so it sees the stream it would have got without the gateway.
    const prefix = event.event === undefined ? '' : `event: ${event.event}\n`
    // The usual case, on every chunk: only that null goes, and it is the last member of
    // a one-line event. Cut it from the upstream's own text, without copying the event
    // (withoutNullUsage) or serialising it again.
    if (
      !options.clientWantsUsage &&
      renamed === data &&
      hasNullUsage(data) &&
      event.data.endsWith(NULL_USAGE_TAIL) &&
      !event.data.includes('\n')
    ) {
      return pass(`${prefix}data: ${event.data.slice(0, -NULL_USAGE_TAIL.length)}}\n\n`, eventText)
    }
    const shown = options.clientWantsUsage ? renamed : withoutNullUsage(renamed)
    if (shown !== data) return pass(`${prefix}data: ${JSON.stringify(shown)}\n\n`, eventText)
    return pass(event.raw, eventText)
  }
  /**
   * Writes the events on. Without a promise when there is nothing to wait for (no `[DONE]`
   * among them, the client keeps up): the usual stream chunk costs no promise and no turn
   * of the microtask queue of its own.
   */
  const forward = (events: readonly SseEvent[]): Promise<void> | undefined => {
    const from = text.length
    let out = ''
    for (let i = 0; i < events.length; i++) {
      if (gated !== undefined) break
      const event = events[i] as SseEvent
      if (event.data === '[DONE]') return forwardFromDone(events, i, out, from)
      out += shownOf(event)
    }
    const written = out.length > 0 ? sink.send(out) : undefined
    if (written === undefined) {
      tell(from)
      return undefined
    }
    return written.then(() => tell(from))
  }
  /** forward() from a `[DONE]` on: `[DONE]`, the stream's last bytes, goes out only after the commit. */
  const forwardFromDone = async (
    events: readonly SseEvent[],
    start: number,
    written: string,
    from: number,
  ): Promise<void> => {
    let out = written
    for (let i = start; i < events.length; i++) {
      if (gated !== undefined) break
      const event = events[i] as SseEvent
      if (event.data !== '[DONE]') {
        out += shownOf(event)
        continue
      }
      if (gate !== undefined) {
        const rest = gate.end()
        if (typeof rest !== 'string') {
          gated = rest
          break
        }
        out += rest
      }
      const usage = await tapped()
      out += usageTrailer(usage)
      if (out.length > 0) await sink.write(out)
      out = ''
      await commit(options, usage.usage)
      out += event.raw
    }
    if (out.length > 0) await sink.write(out)
    tell(from)
  }
  const tapped = async (): Promise<Tapped> => {
    if (reported !== undefined) return { usage: reported, usageSource: 'reported' }
    // A stream that was only an upstream's error (and reported no usage) charges nothing.
    if (status >= 400 || onlyErrors === true) return NONE
    return counted(options, text.join(''))
  }

  /** A gate ended the stream: its error event is the last the client gets. */
  const endGated = async (error: GatewayError): Promise<RelayOutcome> => {
    sink.end(`data: ${JSON.stringify(error.toBody())}\n\n`)
    return finish(status, sink, await tapped(), { error })
  }
  try {
    while (!sink.aborted && gated === undefined) {
      const next = await chunks.next()
      if (next.done === true) break
      const pending = forward(parser.push(next.value))
      if (pending !== undefined) await pending
    }
    if (gated !== undefined) return await endGated(gated)
  } catch (err) {
    if (sink.aborted) return finish(status, sink, await tapped())
    const error = upstreamError(err)
    // The status is long gone; an error event is how an OpenAI client learns of it. A
    // half-received event is left out: its lines would run into the error's.
    sink.end(`data: ${JSON.stringify(error.toBody())}\n\n`)
    return finish(status, sink, await tapped(), { error })
  }
  if (!sink.aborted) {
    await forward(parser.end())
    const rest = gated ?? gate?.end() ?? ''
    if (typeof rest !== 'string') return endGated(rest)
    if (rest.length > 0) await sink.write(rest)
    tell(text.length)
    // A stream that reported no usage is metered on what it carried, before it ends.
    const usage = await tapped()
    const trailer = usageTrailer(usage)
    if (trailer.length > 0) await sink.write(trailer)
    if (!sink.aborted) await commit(options, usage.usage)
    sink.end()
    return finish(status, sink, usage)
  }
  if (sink.stalled) {
    const error = gatewayError('client_read_timeout', {
      message: `The stream was ended: the client read nothing for ${options.idleReaderMs} ms.`,
    })
    sink.endStalled(`data: ${JSON.stringify(error.toBody())}\n\n`)
  }
  return finish(status, sink, await tapped())
}
