// A test upstream with a quota of its own, the way Azure OpenAI keeps one: an
// OpenAI-compatible /v1/chat/completions (JSON and SSE) on loopback that counts requests
// and tokens, refuses with 429 + retry-after + retry-after-ms once over, and describes its
// quota in x-ratelimit-* headers on every response. It can also be an Ollama whose queue
// is full (503, no wait named), and it measures what a gateway in front of it did: calls,
// 429s, calls per minute, and the most calls it ever had in flight.
//
// Tokens are counted as Azure counts them: at arrival, the prompt's tokens plus the most
// the reply may use (max_completion_tokens, else max_tokens, else the reply this server
// always gives), and never refunded. A refused call counts nothing.
//
// The window is sliding (a log of every admitted call), not fixed: no span of `windowMs`
// ever holds more than the quota. That is the strict reading of "N per minute", so a
// gateway that passes it passes a fixed-window upstream too; a fixed window would let a
// gateway that bursts 2N across a boundary pass unnoticed. Azure itself enforces over
// short periods (1 or 10 s) so that a minute's quota is not spent in one burst: set
// `windowMs: 10_000` and the quota scales to rpm/6 per 10 s. `window: 'fixed'` (windows
// aligned on multiples of windowMs) is there for providers that reset on the minute.
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { formatDuration } from '../../src/limits/duration.ts'

export interface QuotaUpstreamOptions {
  /** Requests per minute; absent: unlimited. */
  rpm?: number
  /** Tokens per minute, counted at arrival (see above); absent: unlimited. */
  tpm?: number
  /** The window the quota is enforced over; the quota scales with it (rpm × windowMs / 60 000). */
  windowMs?: number
  window?: 'sliding' | 'fixed'
  /** The in-flight bound a gateway must keep to; calls beyond it are served but counted in `overConcurrency`. */
  maxConcurrent?: number
  /** How long every admitted call takes before its reply (a model's generation time), so calls overlap. */
  latencyMs?: number
  /** Completion tokens of every reply (one word each). */
  replyTokens?: number
  /** Answer everything with Ollama's 503 for a full queue. */
  ollamaFull?: boolean
  /** The clock the quota runs on. */
  now?: () => number
}

export interface QuotaUpstreamStats {
  /** Chat calls received, refused or not. */
  readonly requests: number
  readonly served: number
  readonly rateLimited: number
  readonly queueFull: number
  /** Calls received per minute since the start (index 0: the first minute). */
  readonly perMinute: readonly number[]
  /** 429s per minute since the start. */
  readonly rateLimitedPerMinute: readonly number[]
  /** Each 429: when (ms since the start), and how long before the window had room for the call. */
  readonly refusals: readonly { readonly at: number; readonly earlyMs: number }[]
  /** The most calls in flight at once. */
  readonly peakInFlight: number
  /** Calls that arrived while maxConcurrent calls were already in flight. */
  readonly overConcurrency: number
}

export interface QuotaUpstream {
  /** Base URL with the version path: http://127.0.0.1:PORT/v1 */
  readonly url: string
  /** Options may be changed between requests. */
  readonly options: QuotaUpstreamOptions
  stats(): QuotaUpstreamStats
  /** Holds every reply until resume(): calls pile up in flight. */
  pause(): void
  resume(): void
  /** Calls in flight now. */
  inFlight(): number
  /** A fixed window's index (windows of windowMs since the epoch, on its clock): a test waits for the next one; null when sliding. */
  windowIndex(): number | null
  close(): Promise<void>
}

interface Entry {
  readonly at: number
  readonly tokens: number
}

const OLLAMA_BUSY = 'server busy, please try again.  maximum pending requests exceeded'
const DEFAULT_REPLY_TOKENS = 5

/** Prompt tokens as this server counts them: one per whitespace-separated word of every message's text, plus 3 per message. */
export function promptTokensOf(body: unknown): number {
  const messages = (body as { messages?: unknown } | null)?.messages
  if (!Array.isArray(messages)) return 0
  let tokens = 0
  for (const m of messages as unknown[]) {
    const content = (m as { content?: unknown } | null)?.content
    const text = typeof content === 'string' ? content : ''
    tokens += 3 + text.split(/\s+/).filter((w) => w.length > 0).length
  }
  return tokens
}

/** What the call is charged at arrival: the prompt plus the most the reply may use. */
export function chargedTokensOf(body: unknown, replyTokens = DEFAULT_REPLY_TOKENS): number {
  const b = (body ?? {}) as { max_completion_tokens?: unknown; max_tokens?: unknown }
  const cap =
    typeof b.max_completion_tokens === 'number'
      ? b.max_completion_tokens
      : typeof b.max_tokens === 'number'
        ? b.max_tokens
        : replyTokens
  return promptTokensOf(body) + cap
}

export async function startQuotaUpstream(options: QuotaUpstreamOptions = {}): Promise<QuotaUpstream> {
  const clock = (): number => (options.now ?? Date.now)()
  const started = clock()
  const log: Entry[] = []
  const counts = { requests: 0, served: 0, rateLimited: 0, queueFull: 0, peakInFlight: 0, overConcurrency: 0 }
  const perMinute: number[] = []
  const rateLimitedPerMinute: number[] = []
  const refusals: { at: number; earlyMs: number }[] = []
  let inFlight = 0
  let paused = false
  let waiting: Array<() => void> = []

  const bump = (series: number[], at: number): void => {
    const minute = Math.max(0, Math.floor((at - started) / 60_000))
    while (series.length <= minute) series.push(0)
    series[minute] = (series[minute] ?? 0) + 1
  }

  /** The calls the window holds at `now`, and (fixed windows) when the window ends. */
  function quota(now: number): { entries: Entry[]; windowEnd: number | null } {
    const windowMs = options.windowMs ?? 60_000
    const fixed = (options.window ?? 'sliding') === 'fixed'
    const start = fixed ? Math.floor(now / windowMs) * windowMs : now - windowMs + 1
    while (log.length > 0 && (log[0]?.at ?? 0) < start) log.shift()
    return { entries: log, windowEnd: fixed ? start + windowMs : null }
  }

  /** When a counted call leaves the window (ms from now). */
  function leaves(e: Entry, windowEnd: number | null, now: number): number {
    return (windowEnd ?? e.at + (options.windowMs ?? 60_000)) - now
  }

  /** How long until `cost` fits under `limit`: 0 if it fits now. */
  function fitWait(
    entries: readonly Entry[],
    windowEnd: number | null,
    now: number,
    weigh: (e: Entry) => number,
    cost: number,
    limit: number,
  ): number {
    const used = entries.reduce((sum, e) => sum + weigh(e), 0)
    if (used + cost <= limit) return 0
    if (cost > limit) return options.windowMs ?? 60_000
    let left = used
    for (const e of entries) {
      left -= weigh(e)
      if (left + cost <= limit) return leaves(e, windowEnd, now)
    }
    return options.windowMs ?? 60_000
  }

  function scaled(perMinuteLimit: number | undefined): number | null {
    if (perMinuteLimit === undefined) return null
    return Math.max(1, Math.floor((perMinuteLimit * (options.windowMs ?? 60_000)) / 60_000))
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk)
    let body: unknown
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      body = null
    }
    const path = (req.url ?? '').split('?', 1)[0]
    if (req.method !== 'POST' || path !== '/v1/chat/completions' || typeof body !== 'object' || body === null) {
      send(res, 404, {}, { error: { message: 'not found', type: 'invalid_request_error', param: null, code: null } })
      return
    }
    const now = clock()
    counts.requests += 1
    bump(perMinute, now)
    if (options.ollamaFull === true) {
      counts.queueFull += 1
      send(res, 503, {}, { error: { message: OLLAMA_BUSY, type: 'api_error', param: null, code: null } })
      return
    }

    const replyTokens = options.replyTokens ?? DEFAULT_REPLY_TOKENS
    const cost = chargedTokensOf(body, replyTokens)
    const rpm = scaled(options.rpm)
    const tpm = scaled(options.tpm)
    const { entries, windowEnd } = quota(now)
    const requestsWait = rpm === null ? 0 : fitWait(entries, windowEnd, now, () => 1, 1, rpm)
    const tokensWait = tpm === null ? 0 : fitWait(entries, windowEnd, now, (e) => e.tokens, cost, tpm)
    // The reset is when the oldest counted call leaves the window, i.e. when one more unit
    // frees up: what a client needs to know. (OpenAI's own is "until the quota is whole
    // again", which on a token bucket is close to it; on a sliding log it would always be
    // the whole window.)
    const headers = (): Record<string, string> => {
      const h: Record<string, string> = {}
      const first = entries[0]
      const reset = formatDuration(first === undefined ? 0 : leaves(first, windowEnd, now))
      if (rpm !== null) {
        h['x-ratelimit-limit-requests'] = String(rpm)
        h['x-ratelimit-remaining-requests'] = String(Math.max(0, rpm - entries.length))
        h['x-ratelimit-reset-requests'] = reset
      }
      if (tpm !== null) {
        h['x-ratelimit-limit-tokens'] = String(tpm)
        h['x-ratelimit-remaining-tokens'] = String(Math.max(0, tpm - entries.reduce((sum, e) => sum + e.tokens, 0)))
        h['x-ratelimit-reset-tokens'] = reset
      }
      return h
    }

    const waitMs = Math.max(requestsWait, tokensWait)
    if (waitMs > 0) {
      counts.rateLimited += 1
      bump(rateLimitedPerMinute, now)
      refusals.push({ at: now - started, earlyMs: waitMs })
      const which = requestsWait >= tokensWait ? 'call rate' : 'token rate'
      const seconds = Math.ceil(waitMs / 1000)
      send(
        res,
        429,
        { ...headers(), 'retry-after': String(seconds), 'retry-after-ms': String(Math.ceil(waitMs)) },
        {
          error: {
            code: '429',
            message: `Requests to the ChatCompletions_Create Operation have exceeded the ${which} limit of your current quota. Please retry after ${seconds} seconds.`,
          },
        },
      )
      return
    }
    log.push({ at: now, tokens: cost })
    const replyHeaders = headers()

    if (options.maxConcurrent !== undefined && inFlight >= options.maxConcurrent) counts.overConcurrency += 1
    inFlight += 1
    counts.peakInFlight = Math.max(counts.peakInFlight, inFlight)
    try {
      const latency = options.latencyMs ?? 0
      if (latency > 0) await new Promise<void>((done) => setTimeout(done, latency))
      if (paused) await new Promise<void>((resume) => waiting.push(resume))
      reply(res, body as Record<string, unknown>, replyHeaders, promptTokensOf(body), replyTokens)
      counts.served += 1
    } finally {
      inFlight -= 1
    }
  }

  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/v1`,
    options,
    stats: () => ({
      ...counts,
      perMinute: [...perMinute],
      rateLimitedPerMinute: [...rateLimitedPerMinute],
      refusals: [...refusals],
    }),
    pause: () => {
      paused = true
    },
    resume: () => {
      paused = false
      const resumed = waiting
      waiting = []
      for (const go of resumed) go()
    },
    inFlight: () => inFlight,
    windowIndex: () =>
      (options.window ?? 'sliding') === 'fixed' ? Math.floor(clock() / (options.windowMs ?? 60_000)) : null,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

function reply(
  res: ServerResponse,
  request: Record<string, unknown>,
  headers: Record<string, string>,
  promptTokens: number,
  replyTokens: number,
): void {
  const model = typeof request.model === 'string' ? request.model : 'quota-model'
  const words = Array.from({ length: replyTokens }, (_, i) => (i === 0 ? 'ok' : ' ok'))
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: words.length,
    total_tokens: promptTokens + words.length,
  }
  const base = { id: 'chatcmpl-quota', created: 1_700_000_000, model }
  if (request.stream !== true) {
    send(res, 200, headers, {
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }],
      usage,
    })
    return
  }
  const wantsUsage = (request.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true
  const chunk = (delta: Record<string, unknown>, finish: string | null): string =>
    JSON.stringify({
      ...base,
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...(wantsUsage ? { usage: null } : {}),
    })
  const events = [
    chunk({ role: 'assistant', content: '' }, null),
    ...words.map((w) => chunk({ content: w }, null)),
    chunk({}, 'stop'),
    ...(wantsUsage ? [JSON.stringify({ ...base, object: 'chat.completion.chunk', choices: [], usage })] : []),
    '[DONE]',
  ]
  res.writeHead(200, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
  res.end(events.map((e) => `data: ${e}\n\n`).join(''))
}
