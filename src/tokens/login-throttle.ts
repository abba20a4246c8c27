// Failed logins, throttled per username and per client address with rate-limiter-flexible:
// in Redis when the store is (every instance counts together; an in-memory limiter stands
// in while Redis is down), else in this process.
//
// Every attempt is charged before its password is checked, so a burst of parallel guesses
// cannot all slip past a check made before any of them failed: once a username or an
// address has had its allowance within the window, the next attempt is refused with 429
// (and the key blocked for blockSeconds) without hashing anything. A right password gives
// the charge back: the username's count starts over, the address gets its point back.
import { createHash } from 'node:crypto'
import type { RedisConnection } from '../store/redis-client.ts'
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible'
import { gatewayError } from '../errors.ts'

export interface LoginThrottleOptions {
  readonly maxFailuresPerUsername: number
  readonly maxFailuresPerAddress: number
  readonly windowSeconds: number
  readonly blockSeconds: number
  /** Count in Redis, shared by every instance (under `<prefix>{tg}:login:`). */
  readonly redis?: { readonly client: RedisConnection; readonly prefix: string }
}

export interface LoginThrottle {
  /** Charges one attempt to the username and the address; throws login_throttled (429, retry-after) past either allowance. */
  attempt(username: string, address: string): Promise<void>
  /** The password was right: the charge is given back. */
  succeeded(username: string, address: string): Promise<void>
}

/**
 * Usernames compare without case here, so `Alice` and `alice` share one count. Hashed: any
 * string a client sends (a lone surrogate included) makes a key, and no username is written
 * to Redis in the clear.
 */
const userKey = (username: string): string => createHash('sha256').update(username.toLowerCase()).digest('base64url')

export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const limiter = (name: string, points: number): RateLimiterAbstract => {
    const common = { points, duration: options.windowSeconds, blockDuration: options.blockSeconds }
    const memory = new RateLimiterMemory({ ...common, keyPrefix: `login-${name}` })
    if (options.redis === undefined) return memory
    return new RateLimiterRedis({
      ...common,
      storeClient: options.redis.client,
      useRedisPackage: false,
      keyPrefix: `${options.redis.prefix}{tg}:login:${name}`,
      insuranceLimiter: memory,
    })
  }
  const byUser = limiter('user', options.maxFailuresPerUsername)
  const byAddress = limiter('addr', options.maxFailuresPerAddress)

  /** ms the key is refused for, or 0 if this attempt is within the allowance. */
  const charge = async (l: RateLimiterAbstract, key: string): Promise<number> => {
    try {
      await l.consume(key)
      return 0
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return Math.max(1, rejection.msBeforeNext)
      throw rejection
    }
  }

  return {
    async attempt(username, address) {
      const [user, addr] = await Promise.all([charge(byUser, userKey(username)), charge(byAddress, address)])
      const ms = Math.max(user, addr)
      if (ms === 0) return
      const seconds = Math.ceil(ms / 1000)
      throw gatewayError('login_throttled', {
        message: `Too many failed login attempts. Try again in ${seconds} seconds.`,
        headers: { 'retry-after': String(seconds), 'retry-after-ms': String(ms) },
      })
    },
    async succeeded(username, address) {
      await Promise.all([byUser.delete(userKey(username)), byAddress.reward(address, 1)])
    },
  }
}
