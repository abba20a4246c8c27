// Where events come from that no single admin action makes: a key's rate limit refusing a
// call (the limiter, wrapped), an upstream deployment with no room (capacity's hook), a
// login throttle block (its hook), and keys reaching their expiry (a scan). Each decides
// here how often it speaks: the first two are sampled (once per key per limits window,
// once per deployment per minute), the last two happen once per occurrence. A dedupe key
// makes the same occurrence seen by several instances one event.
import { GatewayError } from '../errors.ts'
import type { KeyRecord } from '../keys/record.ts'
import type { Limiter } from '../limits/port.ts'
import type { Logger } from '../observability/logger.ts'
import type { KeyStore } from '../store/ports.ts'
import type { EventData, Events, KeyEventData } from './types.ts'

const DAY_MS = 86_400_000
const MINUTE_MS = 60_000
/** Entries a sampler keeps before it forgets those of past windows. */
const SAMPLER_SIZE = 10_000

/** At most once per (subject, window) on this instance; other instances are the dedupe key's. */
function sampler(): (subject: string, window: number) => boolean {
  const last = new Map<string, number>()
  return (subject, window) => {
    if (last.get(subject) === window) return false
    if (last.size >= SAMPLER_SIZE) for (const [s, w] of last) if (w < window) last.delete(s)
    last.set(subject, window)
    return true
  }
}

export function keyEventData(record: KeyRecord): KeyEventData {
  return { key_id: record.id, name: record.name, owner: record.owner, tier: record.tier, prefix: record.prefix }
}

/**
 * The limiter, saying `key.rate_limited` when it refuses a call on a key's rate limit: the
 * first refusal of a key in a limits window (fixed windows of `windowMs`). A call that could
 * never fit (x-should-retry: false) and a spent quota are not a rate limit being hit.
 */
export function withRateLimitEvents(
  limiter: Limiter,
  events: Events,
  windowMs: number,
  now: () => number = Date.now,
): Limiter {
  const first = sampler()
  // Everything else is the limiter's own (its methods are plain closures): only admit() listens.
  return {
    ...limiter,
    // The admission's own promise when it admits: only a refusal has anything to say here.
    admit(request) {
      return limiter.admit(request).catch((error: unknown) => {
        if (
          error instanceof GatewayError &&
          (error.errorName === 'rate_limit_requests' || error.errorName === 'rate_limit_tokens') &&
          error.headers['x-should-retry'] !== 'false'
        ) {
          const window = Math.floor(now() / windowMs) * windowMs
          if (first(request.keyId, window))
            events.fire(
              'key.rate_limited',
              {
                key_id: request.keyId,
                model: request.model,
                limit: error.errorName === 'rate_limit_requests' ? 'requests' : 'tokens',
                window_start: new Date(window).toISOString(),
                window_ms: windowMs,
              },
              { dedupeKey: `key.rate_limited:${request.keyId}:${window}` },
            )
        }
        throw error
      })
    },
  }
}

/** capacity's onSaturated hook: `deployment.saturated` at most once per deployment per minute. */
export function saturationEvents(
  events: Events,
  now: () => number = Date.now,
): (deploymentId: string, reason: 'full' | 'cooling_down', until: number | null) => void {
  const first = sampler()
  return (deployment, reason, until) => {
    const minute = Math.floor(now() / MINUTE_MS) * MINUTE_MS
    if (!first(deployment, minute)) return
    events.fire(
      'deployment.saturated',
      {
        deployment,
        reason,
        until: until === null ? null : new Date(until).toISOString(),
        minute: new Date(minute).toISOString(),
      },
      { dedupeKey: `deployment.saturated:${deployment}:${minute}` },
    )
  }
}

/** The login throttle's onLockout hook: `user.locked_out`, once per block. */
export function lockoutEvents(
  events: Events,
): (info: { username: string; address: string; scope: 'user_address' | 'address'; untilMs: number }) => void {
  return (info) => {
    const data: EventData['user.locked_out'] = {
      username: info.username,
      address: info.address,
      scope: info.scope,
      until: new Date(info.untilMs).toISOString(),
    }
    events.fire('user.locked_out', data, {
      // One block has one end; two refusals of it within a second of each other name the same.
      dedupeKey: `user.locked_out:${info.scope}:${info.scope === 'address' ? '' : info.username.toLowerCase()}:${info.address}:${Math.round(info.untilMs / 1000)}`,
    })
  }
}

export interface ExpiryScanOptions {
  readonly keys: Pick<KeyStore, 'list'>
  readonly events: Events
  /** key.expiring is said this many days before the expiry. */
  readonly withinDays: number
  readonly intervalMs: number
  /** An expiry older than this is not said any more (its event may have been pruned). */
  readonly lookbackMs: number
  readonly log: Logger
  readonly now?: () => number
}

export interface ExpiryScan {
  /** One pass now (tests, and the first at start). */
  scan(): Promise<void>
  close(): void
}

/**
 * Looks at every active key's expiry each interval: `key.expiring` once a key is within
 * `withinDays` of it, `key.expired` once it has passed, each once per expiry date (a new
 * expires_at is a new occurrence). Every instance scans; the dedupe key makes it one event.
 */
export function startKeyExpiryScan(options: ExpiryScanOptions): ExpiryScan {
  const now = options.now ?? Date.now
  /** Dedupe keys this instance has published or seen taken: not asked of the store again. */
  const said = new Set<string>()
  let timer: NodeJS.Timeout | undefined
  let closed = false

  async function say<T extends 'key.expiring' | 'key.expired'>(type: T, data: EventData[T], dedupeKey: string) {
    if (said.has(dedupeKey)) return
    await options.events.publish(type, data, { dedupeKey })
    said.add(dedupeKey)
  }

  async function scan(): Promise<void> {
    const at = now()
    for (const record of await options.keys.list({ status: 'active' })) {
      if (record.expiresAt === null) continue
      const expires = Date.parse(record.expiresAt)
      const base = keyEventData(record)
      if (expires <= at) {
        if (at - expires <= options.lookbackMs)
          await say('key.expired', { ...base, expires_at: record.expiresAt }, `key.expired:${record.id}:${expires}`)
      } else if (expires - at <= options.withinDays * DAY_MS) {
        await say(
          'key.expiring',
          { ...base, expires_at: record.expiresAt, days_left: Math.ceil((expires - at) / DAY_MS) },
          `key.expiring:${record.id}:${expires}`,
        )
      }
    }
    if (said.size > SAMPLER_SIZE) said.clear()
  }

  function later(): void {
    if (closed) return
    timer = setTimeout(() => {
      scan()
        .catch((error: unknown) =>
          options.log.warn({ err: (error as Error).message }, 'events: key expiry scan failed; trying again'),
        )
        .finally(later)
    }, options.intervalMs)
    timer.unref()
  }
  later()
  return {
    scan,
    close() {
      closed = true
      clearTimeout(timer)
    },
  }
}
