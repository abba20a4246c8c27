// Failed logins (the RAG login and the portal's sign-in), counted with rate-limiter-flexible:
// in Redis when the store is (every instance counts together; an in-memory limiter stands
// in while Redis is down), else in this process.
//
// No one can lock another user out. What is refused (429 for blockSeconds, before the
// password is checked) is one address: past maxFailuresPerUserAddress failures on one
// username from it, or past maxFailuresPerAddress failures on any usernames from it. The
// username itself is never refused: past maxFailuresPerUsername failures from anywhere in
// the window, each attempt on it waits before its password is checked, slowdownMs doubling
// with every further failure up to maxSlowdownMs. An attacker who guesses from one address
// is stopped; one who guesses from many is slowed, and only to what the addresses he has
// allow; the real user, from an address of his own, still gets in (after the delay, at worst).
//
// Every attempt is charged before its password is checked, so a burst of parallel guesses
// cannot all slip past a check made before any of them failed. A right password gives the
// charge back: the (username, address) count starts over, the address and the username get
// their point back.
import { createHash } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'
import { gatewayError } from '../errors.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { redisNamespace } from '../store/redis-kit.ts'

export interface LoginThrottleOptions {
  /** Failures on one username from one address within the window; the next attempt is refused for blockSeconds. */
  readonly maxFailuresPerUserAddress: number
  /** Failures from one address, whatever the usernames; the next attempt is refused for blockSeconds. */
  readonly maxFailuresPerAddress: number
  /** Failures on one username from anywhere within the window before its attempts are slowed (never refused). */
  readonly maxFailuresPerUsername: number
  /** The first slowed attempt's wait; each further failure doubles it. */
  readonly slowdownMs: number
  readonly maxSlowdownMs: number
  readonly windowSeconds: number
  readonly blockSeconds: number
  /** Count in Redis, shared by every instance (under `<prefix>{tg}:login:`). */
  readonly redis?: { readonly client: RedisConnection; readonly prefix: string }
  /**
   * Called when an address starts being refused (once per block: on the failure that goes
   * past an allowance, not on the refusals that follow). Should not throw.
   */
  readonly onLockout?: (info: {
    readonly username: string
    readonly address: string
    readonly scope: 'user_address' | 'address'
    readonly untilMs: number
  }) => void
}

export interface LoginThrottle {
  /**
   * Charges one attempt; throws login_throttled (429, retry-after) if the address is over
   * an allowance, else resolves after the username's slowdown (ms waited), if any.
   */
  attempt(username: string, address: string): Promise<number>
  /** The password was right: the charge is given back. */
  succeeded(username: string, address: string): Promise<void>
}

/**
 * Usernames compare without case here, so `Alice` and `alice` share one count. Hashed: any
 * string a client sends (a lone surrogate included) makes a key, and no username is written
 * to Redis in the clear.
 */
const userKey = (username: string): string => createHash('sha256').update(username.toLowerCase()).digest('base64url')
const pairKey = (username: string, address: string): string =>
  createHash('sha256').update(`${username.toLowerCase()}\n${address}`).digest('base64url')

/** The username's count never refuses: it only measures how slow its next attempt is. */
const UNBOUNDED = Number.MAX_SAFE_INTEGER

/** The wait of an attempt that is the `failures`-th within the window (itself counted). */
export function slowdownOf(
  failures: number,
  options: Pick<LoginThrottleOptions, 'maxFailuresPerUsername' | 'slowdownMs' | 'maxSlowdownMs'>,
): number {
  const over = failures - options.maxFailuresPerUsername
  if (over <= 0 || options.slowdownMs <= 0) return 0
  return Math.min(options.maxSlowdownMs, options.slowdownMs * 2 ** Math.min(over - 1, 30))
}

export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const limiter = (name: string, points: number, blockSeconds: number): RateLimiterAbstract => {
    const common = { points, duration: options.windowSeconds, blockDuration: blockSeconds }
    const memory = new RateLimiterMemory({ ...common, keyPrefix: `login-${name}` })
    if (options.redis === undefined) return memory
    return new RateLimiterRedis({
      ...common,
      storeClient: options.redis.client,
      useRedisPackage: false,
      keyPrefix: `${redisNamespace(options.redis.prefix)}login:${name}`,
      insuranceLimiter: memory,
    })
  }
  const byPair = limiter('pair', options.maxFailuresPerUserAddress, options.blockSeconds)
  const byAddress = limiter('addr', options.maxFailuresPerAddress, options.blockSeconds)
  const byUser = limiter('user-slow', UNBOUNDED, 0)

  /**
   * ms the key is refused for, or 0 if this attempt is within the allowance; `blocked` when
   * this attempt is the one that went past it (counts are atomic: exactly one attempt is).
   */
  const charge = async (l: RateLimiterAbstract, key: string): Promise<{ ms: number; blocked: boolean }> => {
    try {
      await l.consume(key)
      return { ms: 0, blocked: false }
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes)
        return { ms: Math.max(1, rejection.msBeforeNext), blocked: rejection.consumedPoints === l.points + 1 }
      throw rejection
    }
  }

  return {
    async attempt(username, address) {
      const [pair, addr] = await Promise.all([charge(byPair, pairKey(username, address)), charge(byAddress, address)])
      const ms = Math.max(pair.ms, addr.ms)
      if (pair.blocked || addr.blocked)
        options.onLockout?.({
          username,
          address,
          scope: addr.blocked ? 'address' : 'user_address',
          untilMs: Date.now() + (addr.blocked ? addr.ms : pair.ms),
        })
      if (ms > 0) {
        const seconds = Math.ceil(ms / 1000)
        throw gatewayError('login_throttled', {
          message: `Too many failed login attempts. Try again in ${seconds} seconds.`,
          headers: { 'retry-after': String(seconds), 'retry-after-ms': String(ms) },
        })
      }
      // Only attempts whose password is checked count against the username.
      const wait = slowdownOf((await byUser.consume(userKey(username))).consumedPoints, options)
      if (wait > 0) await sleep(wait)
      return wait
    },
    async succeeded(username, address) {
      await Promise.all([
        byPair.delete(pairKey(username, address)),
        byAddress.reward(address, 1),
        byUser.reward(userKey(username), 1),
      ])
    },
  }
}
