// What every room that keeps data in Redis shares: the namespaces of Tollgate's keys,
// scripts run by their SHA, and the mapping of an unreachable Redis to StoreUnavailableError.
// A leaf: it imports nothing but the connection (redis-client.ts) and the store's errors, so
// the stores, the queue, the limiter, the file quota and the feeds all build on it without
// importing one another.
import { createHash } from 'node:crypto'
import { StoreUnavailableError } from './errors.ts'
import { isRedisUnavailable, whenReady, type RedisConnection } from './redis-client.ts'

// Where a key lives on a Redis Cluster (issue #25). A cluster shards by the part of a key
// name in braces (its hash tag), and a script or MULTI may only touch keys of one slot. So:
//
//   <prefix>{tg}:          global state: plans, accounts, signing keys, listing indexes (keys,
//                          usage rows, which key uploaded a file), the queue's global parts,
//                          which slots each gateway journals streams on, the feeds; and what
//                          older Tollgates left there until it ends or is carried over (see
//                          each room). One slot, one master, read rarely.
//   <prefix>{o:<owner>}:   what belongs to one owner (a user): the limiter's counters of its
//                          keys (every dimension, the quota's held counter), its key and owner
//                          budgets, its usage rows, its streams' journal entries; and the
//                          user's sessions (RAG refresh sessions, portal sessions and their
//                          hand-offs, whose ids name the user: store/user-ids.ts). Owners
//                          spread over every master; a call's admission, a stream's open and
//                          checkpoints, and the settle each stay one script on its owner's slot.
//   <prefix>{k:<keyId>}:   the same for a key without an owner (its own owner); and a key's
//                          own counts of its files (files/redis-quota-store.ts).
//   <prefix>{t:<tenant>}:  a tenant budget's counters. They span owners, so the one exception:
//                          a call under a tenant budget pays a second script there
//                          (limits/redis-counters.ts).
//
//   <prefix>{rc:<scope>}:  one cache scope's stored replies (cache/redis-store.ts): its entries,
//                          their index and its byte count, so a store and its evictions are one script.
//
//   <prefix>{c:<pool>}:    the capacity of a pool of upstream deployments (capacity/create.ts
//                          poolsOf: those one call may choose among, so its pick stays one
//                          script); pools spread over the masters.
//
//   <prefix>{s:<scope>}:   a learned output reservation's sketch (reservations/redis-store.ts):
//                          one per key × model, tier × model and model; spread over the masters.
//
//   <prefix>{q<n>}:        shard n of the stored queue (queue/shards.ts): its BullMQ queue, the
//                          lines, records and results of the keys hashed to it. A request's
//                          scripts touch one shard; its id names the shard.
//
// They are built only here; a room adds its own part after them (`rl:`, `q:`...).

function checkPrefix(prefix: string): void {
  if (prefix.includes('{') || prefix.includes('}')) {
    throw new RangeError('the Redis key prefix may not contain "{" or "}": it would replace the {tg} hash tag')
  }
}

/**
 * `<prefix>{tg}:`, under which Tollgate's global keys and channels live: the one hash tag
 * puts them all on one cluster slot, so any script or MULTI may touch any of them. Rooms
 * add their own part (`q:`, `rl:`, `fq:`...). The only place that builds it.
 */
export function redisNamespace(prefix: string): string {
  checkPrefix(prefix)
  return `${prefix}{tg}:`
}

/** Whose state: a key, and its owner (absent, or the key id itself: the key has none). */
export interface Identity {
  readonly keyId: string
  readonly owner?: string | undefined
}

/**
 * `<prefix>{o:<owner>}:`, or `<prefix>{k:<keyId>}:` for a key without an owner: the slot
 * of everything that belongs to one owner. The parts are URI-encoded, so no `{` or `}`
 * of an id can end the hash tag early.
 */
export function identityNamespace(prefix: string, identity: Identity): string {
  checkPrefix(prefix)
  const { keyId, owner } = identity
  return owner === undefined || owner === keyId
    ? `${prefix}{k:${encodeURIComponent(keyId)}}:`
    : userNamespace(prefix, owner)
}

/**
 * `<prefix>{o:<user>}:`, the slot of a user (an account): the owner of its keys, so its
 * sessions live beside its keys' counters. The one place `{o:` is built.
 */
export function userNamespace(prefix: string, user: string): string {
  checkPrefix(prefix)
  return `${prefix}{o:${encodeURIComponent(user)}}:`
}

/** `<prefix>{t:<tenant>}:`, the slot of a tenant's budget counters. */
export function tenantNamespace(prefix: string, tenant: string): string {
  checkPrefix(prefix)
  return `${prefix}{t:${encodeURIComponent(tenant)}}:`
}

/** `<prefix>{rc:<scope>}:`, the slot of one scope's cached replies (cache/redis-store.ts). */
export function cacheScopeNamespace(prefix: string, scope: string): string {
  checkPrefix(prefix)
  return `${prefix}{rc:${encodeURIComponent(scope)}}:`
}

/**
 * `<prefix>{c:<pool>}:`, the slot of a pool of upstream deployments' capacity
 * (capacity/create.ts poolsOf: the deployments one call may choose among, in one script).
 */
export function capacityNamespace(prefix: string, pool: string): string {
  checkPrefix(prefix)
  return `${prefix}{c:${encodeURIComponent(pool)}}:`
}

/** `<prefix>{s:<scope>}:`, the slot of one output-length sketch (reservations/redis-store.ts). */
export function sketchNamespace(prefix: string, scope: string): string {
  checkPrefix(prefix)
  return `${prefix}{s:${encodeURIComponent(scope)}}:`
}

/**
 * `<prefix>{q<shard>}:`, the slot of one shard of the stored queue (queue/shards.ts says
 * which key goes to which). The queue's global parts (owner indexes, heartbeats, the
 * sweep's lock, requests stored before the queue was sharded) stay under redisNamespace.
 */
export function queueShardNamespace(prefix: string, shard: number): string {
  checkPrefix(prefix)
  if (!Number.isInteger(shard) || shard < 0) throw new RangeError(`a queue shard is a whole number >= 0, not ${shard}`)
  return `${prefix}{q${shard}}:`
}

/** A Lua script and its SHA-1, by which Redis caches it. */
export interface Script {
  readonly source: string
  readonly sha: string
}

export function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

/** What a script is given besides its keys. */
export type ScriptArg = string | number | Buffer

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT')
}

/**
 * EVALSHA, falling back to EVAL when Redis does not have the script (a restart or a
 * failover: replicas do not keep the script cache), which caches it for the next call.
 */
export async function runScript(
  redis: RedisConnection,
  s: Script,
  keys: readonly string[],
  args: readonly ScriptArg[],
): Promise<unknown> {
  try {
    return await redis.evalsha(s.sha, keys.length, ...keys, ...args)
  } catch (error) {
    if (!isNoScript(error)) throw error
    return await redis.eval(s.source, keys.length, ...keys, ...args)
  }
}

/**
 * What a failed call means for the caller. A Redis it cannot reach, or one in the middle
 * of a failover (isRedisUnavailable), becomes StoreUnavailableError. Any other ReplyError
 * (Redis answered "no") and an adapter's own errors (conflicts, corrupt values,
 * unexpected replies: other classes) pass through unchanged.
 */
export function unavailable(error: unknown, unsent = isOfflineRefusal(error)): unknown {
  if (!isRedisUnavailable(error)) return error
  return new StoreUnavailableError(`Redis did not answer: ${error.message}`, { cause: error, unsent })
}

/** ioredis refused to send: no connection, and the offline queue is off. */
function isOfflineRefusal(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("Stream isn't writeable")
}

/** Runs fn once the connection is up, reporting a missing Redis as StoreUnavailableError. */
export async function withRedis<T>(redis: RedisConnection, fn: () => Promise<T>): Promise<T> {
  if (redis.status !== 'ready') {
    try {
      await whenReady(redis)
    } catch (error) {
      throw unavailable(error, true)
    }
  }
  try {
    return await fn()
  } catch (error) {
    throw unavailable(error)
  }
}

/** A script or transaction answered something it never should: a bug, not an outage. */
export function unexpected(what: string, reply: unknown): TypeError {
  return new TypeError(`${what} answered ${JSON.stringify(reply)}`)
}

/** `<prefix>{f:<scope>}:`, the slot of one contended scope's fair-share counters (fairness/store.ts). */
export function fairNamespace(prefix: string, scope: string): string {
  checkPrefix(prefix)
  return `${prefix}{f:${encodeURIComponent(scope)}}:`
}
