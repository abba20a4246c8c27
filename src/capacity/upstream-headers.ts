// What one upstream response teaches about the deployment that sent it. OpenAI and Azure
// describe their quota on every response (x-ratelimit-limit-*, -remaining-*, -reset-*); a
// 429 or 503 names a wait in retry-after or retry-after-ms (the openai SDK reads the same
// two, -ms first); Ollama answers 503 {"error":"server busy, please try again.  maximum
// pending requests exceeded"} with no wait at all when OLLAMA_MAX_QUEUE is reached; vLLM
// queues without bound and refuses nothing by itself, so only a declared maxConcurrent
// protects it (a 503 in front of it, from a proxy, reads as "overloaded").
//
// Anthropic says the same in its own words: anthropic-ratelimit-{requests,tokens,input-tokens,
// output-tokens}-{limit,remaining,reset}, each reset an RFC 3339 instant, and retry-after on
// its 429s and 529s (its adapter answers a 529 as the 503 it means here).
//
// These headers come from a server we do not control, or from something pretending to be
// one: anything malformed, negative, absurdly large or repeated with two values is
// ignored, never thrown on, and every wait is capped.

/** Header values as Node gives them (lower-case names), or as an adapter flattened them. */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | undefined>>

/** What the response says about one dimension (requests or tokens) of the quota. */
export interface DimensionObservation {
  /** The quota's size, when the upstream states it. */
  readonly limit: number | null
  /** What is left of it, when stated. */
  readonly remaining: number | null
  /** When it is full again (epoch ms), when stated. */
  readonly resetAt: number | null
}

export type ObservationKind =
  /** Served (any status below 400 other than the refusals below). */
  | 'served'
  /** 429: over the deployment's rate limit. */
  | 'rate_limited'
  /** 429 insufficient_quota: the account is out of credit; waiting a second will not help. */
  | 'out_of_quota'
  /** 503 from Ollama whose queue is full (OLLAMA_MAX_QUEUE). */
  | 'queue_full'
  /** Any other 503. */
  | 'overloaded'
  /** Any other status: the client's own answer (4xx) or a failure (5xx), not a capacity signal. */
  | 'other'

export interface UpstreamObservation {
  readonly kind: ObservationKind
  /** The upstream refused without acting on the request (429, 503): safe to move on to another deployment. */
  readonly refused: boolean
  /** Send nothing more to this deployment before this time (epoch ms), or null. Set on refusals only. */
  readonly cooldownUntil: number | null
  readonly requests: DimensionObservation | null
  readonly tokens: DimensionObservation | null
}

export interface ObserveOptions {
  /** The time the response arrived (epoch ms): relative waits count from it. */
  readonly now: number
  /** The start of an error body, when the caller read it: tells Ollama's full queue and insufficient_quota apart. */
  readonly body?: string
  /** Cooldown after a 429 that names no wait. LiteLLM's default is 5 s; the headers usually say more. */
  readonly rateLimitedCooldownMs?: number
  /** Cooldown after a 503 that names no wait (Ollama's never does: its queue drains as calls finish). */
  readonly overloadedCooldownMs?: number
  /** Cooldown after insufficient_quota. */
  readonly outOfQuotaCooldownMs?: number
  /** Longest cooldown any header may impose. */
  readonly maxCooldownMs?: number
  /** Resets further away than this are not believed. */
  readonly maxResetMs?: number
}

export const OBSERVE_DEFAULTS = {
  rateLimitedCooldownMs: 1000,
  overloadedCooldownMs: 1000,
  outOfQuotaCooldownMs: 60_000,
  maxCooldownMs: 10 * 60_000,
  maxResetMs: 24 * 3_600_000,
} as const

/** Longer values are not a number or a duration any upstream sends. */
const MAX_VALUE_LENGTH = 64
const NUMBER = /^\d{1,15}(?:\.\d{1,9})?$/
/** Plain numbers above this are epoch seconds (some providers write their reset that way), not a wait. */
const EPOCH_SECONDS_FLOOR = 1_000_000_000
const UNIT_MS: Readonly<Record<string, number>> = {
  h: 3_600_000,
  m: 60_000,
  s: 1000,
  ms: 1,
  us: 0.001,
  µs: 0.001,
  μs: 0.001,
  ns: 0.000_001,
}
const DURATION_PART = /(\d{1,15}(?:\.\d{1,9})?)(h|ms|m|s|us|µs|μs|ns)/y
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/
/** An RFC 3339 instant, as Anthropic writes its resets: "2026-12-07T13:20:00Z". */
const RFC_3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/i
const OLLAMA_QUEUE_FULL = /server busy|maximum pending requests/i

/** One header's single value, or null when absent, repeated with different values, or implausibly long. */
function single(headers: HeaderBag, name: string): string | null {
  const raw = headers[name]
  let value: string | undefined
  if (typeof raw === 'string') value = raw
  else if (Array.isArray(raw)) {
    const distinct = new Set(raw as readonly string[])
    if (distinct.size !== 1) return null
    value = raw[0]
  }
  if (value === undefined) return null
  const trimmed = value.trim()
  return trimmed.length === 0 || trimmed.length > MAX_VALUE_LENGTH ? null : trimmed
}

/** A non-negative decimal, or null. */
function decimal(text: string | null): number | null {
  if (text === null || !NUMBER.test(text)) return null
  const n = Number(text)
  return Number.isFinite(n) ? n : null
}

/**
 * A wait in milliseconds from Go's time.Duration format as OpenAI writes it ("20ms", "1s",
 * "6m0s", "1h2m3.5s"), or a plain number of seconds. Null if it is neither.
 */
export function parseWaitMs(text: string): number | null {
  const plain = decimal(text)
  if (plain !== null) return plain * 1000
  if (text.length > MAX_VALUE_LENGTH) return null
  DURATION_PART.lastIndex = 0
  let total = 0
  let parts = 0
  while (DURATION_PART.lastIndex < text.length) {
    const match = DURATION_PART.exec(text)
    if (match === null) return null
    total += Number(match[1]) * (UNIT_MS[match[2] ?? ''] ?? Number.NaN)
    parts += 1
  }
  return parts > 0 && Number.isFinite(total) ? total : null
}

/** When a reset header says the quota is full again (epoch ms), or null. */
function resetAt(text: string | null, now: number, maxResetMs: number): number | null {
  if (text === null) return null
  if (RFC_3339.test(text)) {
    const date = Date.parse(text)
    return Number.isFinite(date) && date - now <= maxResetMs ? Math.ceil(Math.max(date, now)) : null
  }
  const plain = decimal(text)
  // Epoch seconds, not a wait: believed only when close enough to now.
  const at = plain !== null && plain >= EPOCH_SECONDS_FLOOR ? plain * 1000 : now + (parseWaitMs(text) ?? Number.NaN)
  if (!Number.isFinite(at) || at - now > maxResetMs) return null
  return Math.ceil(Math.max(at, now))
}

/** The wait a 429 or 503 names (epoch ms it ends), retry-after-ms first, as the openai SDK reads them; null if none. */
export function retryAfterAt(headers: HeaderBag, now: number): number | null {
  const ms = decimal(single(headers, 'retry-after-ms'))
  if (ms !== null) return Math.ceil(now + ms)
  const text = single(headers, 'retry-after')
  if (text === null) return null
  const seconds = decimal(text)
  if (seconds !== null) return Math.ceil(now + seconds * 1000)
  if (!IMF_FIXDATE.test(text)) return null
  const date = Date.parse(text)
  return Number.isFinite(date) ? Math.max(date, now) : null
}

/** The header names of one dimension's triple, by part. */
interface Names {
  readonly limit: string
  readonly remaining: string
  readonly reset: string
}
const namesOf = (name: (part: keyof Names) => string): Names => ({
  limit: name('limit'),
  remaining: name('remaining'),
  reset: name('reset'),
})
/** Built once, not per response: every response is read for them. */
const NAMES = {
  openAI: {
    requests: namesOf((part) => `x-ratelimit-${part}-requests`),
    tokens: namesOf((part) => `x-ratelimit-${part}-tokens`),
  },
  anthropic: {
    requests: namesOf((part) => `anthropic-ratelimit-requests-${part}`),
    tokens: namesOf((part) => `anthropic-ratelimit-tokens-${part}`),
  },
} as const

/** Anthropic's input and output token quotas, read when it does not send the tokens-* triple. */
const ANTHROPIC_TOKEN_PARTS = ['input-tokens', 'output-tokens'].map((dimension) =>
  namesOf((part) => `anthropic-ratelimit-${dimension}-${part}`),
)

function dimension(
  headers: HeaderBag,
  suffix: 'requests' | 'tokens',
  now: number,
  maxResetMs: number,
): DimensionObservation | null {
  const own = triple(headers, NAMES.openAI[suffix], now, maxResetMs)
  if (own !== null) return own
  const anthropic = triple(headers, NAMES.anthropic[suffix], now, maxResetMs)
  // Anthropic's tokens-* is "the most restrictive limit currently in effect"; without it, of
  // its input and output quotas the one with least left of its whole is the one that binds.
  if (anthropic !== null || suffix === 'requests') return anthropic
  let tightest: DimensionObservation | null = null
  for (const names of ANTHROPIC_TOKEN_PARTS) {
    const d = triple(headers, names, now, maxResetMs)
    if (d !== null && (tightest === null || share(d) < share(tightest))) tightest = d
  }
  return tightest
}

/** What is left of a quota as a share of it (1 when unknown). */
function share(d: DimensionObservation): number {
  return d.remaining === null
    ? 1
    : d.limit === null || d.limit === 0
      ? d.remaining === 0
        ? 0
        : 1
      : d.remaining / d.limit
}

function triple(headers: HeaderBag, names: Names, now: number, maxResetMs: number): DimensionObservation | null {
  const limit = decimal(single(headers, names.limit))
  let remaining = decimal(single(headers, names.remaining))
  const reset = resetAt(single(headers, names.reset), now, maxResetMs)
  if (limit === null && remaining === null && reset === null) return null
  // More left than the whole quota: believe the quota.
  if (limit !== null && remaining !== null && remaining > limit) remaining = limit
  return {
    limit: limit === null ? null : Math.floor(limit),
    remaining: remaining === null ? null : Math.floor(remaining),
    resetAt: reset,
  }
}

function kindOf(status: number, body: string | undefined): ObservationKind {
  const start = body?.slice(0, 4096) ?? ''
  if (status === 429) return start.includes('insufficient_quota') ? 'out_of_quota' : 'rate_limited'
  if (status === 503) return OLLAMA_QUEUE_FULL.test(start) ? 'queue_full' : 'overloaded'
  return status < 400 ? 'served' : 'other'
}

/** The latest reset among the dimensions that ran out: a 429 that names no wait is over then. */
function exhaustedUntil(dimensions: readonly (DimensionObservation | null)[]): number | null {
  let until: number | null = null
  for (const d of dimensions) {
    if (d?.remaining === 0 && d.resetAt !== null) until = Math.max(until ?? 0, d.resetAt)
  }
  return until
}

/** Reads a response's status and headers (and, for a refusal, the start of its body). Never throws. */
export function observeResponse(status: number, headers: HeaderBag, options: ObserveOptions): UpstreamObservation {
  const settings = { ...OBSERVE_DEFAULTS, ...definedOnly(options) }
  const now = options.now
  const kind = kindOf(status, options.body)
  const requests = dimension(headers, 'requests', now, settings.maxResetMs)
  const tokens = dimension(headers, 'tokens', now, settings.maxResetMs)
  const refused = kind === 'rate_limited' || kind === 'out_of_quota' || kind === 'queue_full' || kind === 'overloaded'
  let cooldownUntil: number | null = null
  if (refused) {
    const fallback =
      kind === 'rate_limited'
        ? settings.rateLimitedCooldownMs
        : kind === 'out_of_quota'
          ? settings.outOfQuotaCooldownMs
          : settings.overloadedCooldownMs
    const named = retryAfterAt(headers, now) ?? (kind === 'rate_limited' ? exhaustedUntil([requests, tokens]) : null)
    cooldownUntil = Math.min(named ?? now + fallback, now + settings.maxCooldownMs)
  }
  return { kind, refused, cooldownUntil, requests, tokens }
}

/** Whether an observation carries anything worth storing. */
export function teaches(observation: UpstreamObservation): boolean {
  return observation.refused || observation.requests !== null || observation.tokens !== null
}

function definedOnly(options: ObserveOptions): Partial<typeof OBSERVE_DEFAULTS> {
  const out: Record<string, number> = {}
  for (const key of Object.keys(OBSERVE_DEFAULTS) as (keyof typeof OBSERVE_DEFAULTS)[]) {
    const value = options[key]
    if (typeof value === 'number' && Number.isFinite(value) && value >= 0) out[key] = value
  }
  return out
}
