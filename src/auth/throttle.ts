// Failed authentication, throttled per client address. Failures (a missing, malformed,
// unknown, expired or revoked API key; a wrong admin token) are counted by
// rate-limiter-flexible; past maxFailures in a window the address is refused with 429
// for blockSeconds, before its credential is even looked at: a throttled address costs
// no hashing and no store lookup, which is the point against someone walking through
// guessed keys.
//
// Each kind of credential has its throttle (main.ts makes two): an address that failed with
// API keys is not refused the right admin token, so an operator behind the NAT of a client
// that misconfigured its key can still reach the admin API; wrong admin tokens are counted,
// and refused, by the admin throttle alone.
//
// Counted in this process's memory: the check sits on every request's path, and asking
// Redis there would cost a round trip per request and fail with it. Behind a balancer
// each instance counts on its own, so an address gets at most maxFailures per instance.
import type { IncomingMessage } from 'node:http'
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'
import { GatewayError, gatewayError } from '../errors.ts'
import type { AdminAuthenticator } from './admin.ts'
import type { ApiKeyAuthenticator } from './api-key.ts'

export interface AuthThrottleOptions {
  /** Failures allowed per address within windowSeconds; the next one blocks it. */
  readonly maxFailures: number
  readonly windowSeconds: number
  readonly blockSeconds: number
  /** Which credentials it counts ("api-keys", "admin-token"): the limiter's key prefix. */
  readonly name?: string
  readonly now?: () => number
}

export interface AuthThrottle {
  /** Throws auth_throttled while the address is blocked. Synchronous and store-free. */
  check(address: string): void
  /** Counts one failure of the address. */
  failed(address: string): Promise<void>
  /** Addresses blocked now. */
  blocked(): number
}

/** Blocked addresses kept at most; past it the expired ones are swept, then the oldest dropped. */
const MAX_BLOCKED = 100_000

export function createAuthThrottle(options: AuthThrottleOptions): AuthThrottle {
  const now = options.now ?? Date.now
  const failures = new RateLimiterMemory({
    keyPrefix: `auth-failures:${options.name ?? 'any'}`,
    points: options.maxFailures,
    duration: options.windowSeconds,
    blockDuration: options.blockSeconds,
  })
  // The limiter's verdict, kept where a synchronous check can read it.
  const blockedUntil = new Map<string, number>()

  const block = (address: string, ms: number): void => {
    blockedUntil.delete(address)
    blockedUntil.set(address, now() + ms)
    if (blockedUntil.size <= MAX_BLOCKED) return
    const at = now()
    for (const [key, until] of blockedUntil) if (until <= at) blockedUntil.delete(key)
    while (blockedUntil.size > MAX_BLOCKED) {
      const oldest = blockedUntil.keys().next()
      if (oldest.done === true) break
      blockedUntil.delete(oldest.value)
    }
  }

  return {
    check(address) {
      const until = blockedUntil.get(address)
      if (until === undefined) return
      const ms = until - now()
      if (ms <= 0) {
        blockedUntil.delete(address)
        return
      }
      const seconds = Math.ceil(ms / 1000)
      throw gatewayError('auth_throttled', {
        message: `Too many failed authentication attempts from your address. Try again in ${seconds}s.`,
        headers: { 'retry-after': String(seconds), 'retry-after-ms': String(ms) },
      })
    },
    async failed(address) {
      try {
        await failures.consume(address)
      } catch (rejection) {
        // Over the limit: the limiter answers with how long the block lasts.
        if (rejection instanceof RateLimiterRes) block(address, Math.max(1, rejection.msBeforeNext))
      }
    },
    blocked() {
      const at = now()
      let count = 0
      for (const until of blockedUntil.values()) if (until > at) count++
      return count
    },
  }
}

const isAuthFailure = (err: unknown): boolean => err instanceof GatewayError && err.status === 401

/** The API-key authenticator behind the throttle. */
export function throttleApiKeys(
  authenticate: ApiKeyAuthenticator,
  throttle: AuthThrottle,
  addressOf: (req: IncomingMessage) => string,
): ApiKeyAuthenticator {
  return async (req) => {
    const address = addressOf(req)
    throttle.check(address)
    try {
      return await authenticate(req)
    } catch (err) {
      if (isAuthFailure(err)) await throttle.failed(address)
      throw err
    }
  }
}

/**
 * The admin authenticator behind its own throttle (not the API keys'): only wrong admin tokens
 * block the right one. It is synchronous, so the failure is counted without waiting.
 */
export function throttleAdmin(
  authenticate: AdminAuthenticator,
  throttle: AuthThrottle,
  addressOf: (req: IncomingMessage) => string,
): AdminAuthenticator {
  return (req) => {
    const address = addressOf(req)
    throttle.check(address)
    try {
      authenticate(req)
    } catch (err) {
      if (isAuthFailure(err)) void throttle.failed(address)
      throw err
    }
  }
}
