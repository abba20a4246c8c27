// The queue store on Redis, shared by every instance. It is split into shards (issue #25),
// each under a hash tag of its own, `<prefix>{q<n>}:q:` (shards.ts says which key goes to
// which), so a cluster spreads them over its masters. A shard holds, for the keys hashed
// to it:
//
//   line:<key>:<model>   sorted set of tickets, scored by the shard's sequence (FIFO)
//   lines                set of the shard's lines with someone in them
//   seq                  the sequence
//   req:<id>             hash: meta (JSON: who, what, when), payload (the body, JSON, until
//                        it finishes), status, attempts, startedAt, finishedAt, cancel,
//                        runner (the instance it is leased to)
//   leases               hash: id → line and createdAt of every leased request of the shard
//   res:<id>             the result (JSON), expiring with its time to live
//   body:<id>            the multipart bytes, until the request finishes
//   pend:<key>           sorted set of a key's pending (queued, in_progress) requests by creation time
//   pendb:<key>          hash: their sizes by id, and the total under '#'
//
// Under `<prefix>{tg}:q:`, global, each written once per request or per interval:
//
//   owner:<owner>        sorted set of an owner's requests by creation time (an owner's
//                        keys span shards; written before the request, so a list never
//                        misses one, and an entry whose record never came is dropped by it)
//   alive:<instance>     a gateway's heartbeat: its calls in line are served
//   sweep                who swept last (a lock with the sweep interval as its life)
//
// and the requests stored before the queue was sharded (ids without a shard), in the same
// keys as a shard's: they are read, run, finished and swept there until none is left.
//
// Every change that touches a record and its line is one Lua script declaring every key
// it touches, all of one shard, so a request is never in a line without its record, nor
// out of it while queued.
import { closeRedis, pingRedis, type RedisConnection } from '../store/redis-client.ts'
import {
  queueShardNamespace,
  redisNamespace,
  runScript,
  script as redisScript,
  withRedis,
  type Script,
  type ScriptArg,
} from '../store/redis-kit.ts'
import {
  decodeRecord,
  decodeSummary,
  encodeMeta,
  encodePayload,
  encodeResult,
  storedSize,
  storedStatus,
} from './record-codec.ts'
import {
  QueueFullError,
  RequestTakenError,
  statusAt,
  type FinalStatus,
  type Lease,
  type LineSummary,
  type QueuedRequest,
  type QueueStore,
  type RequestRef,
  type RequestStatus,
  type RequestSummary,
  type StoreRetention,
  type Ticket,
} from './ports.ts'
import { newRequestId, shardOfId, shardOfKey } from './shards.ts'
import { decodeTicket, encodeTicket, jobTicket, parseLine } from './tickets.ts'
import { storedBand } from '../priority/classes.ts'

/** A script of the queue: its body after the functions every one of them may call. */
function script(body: string): Script {
  return redisScript(LEAVE + body)
}

// Functions every script may call. leave takes `ticket` out of `line`; returns the new
// head when the ticket was the head and someone follows, else false. Drops the line from
// `lines` once it is empty. unlease ends a request's lease; join puts a ticket in line.
const LEAVE = `
local function leave(line, lines, lineId, ticket)
  local rank = redis.call('ZRANK', line, ticket)
  if not rank then return false end
  redis.call('ZREM', line, ticket)
  local first = redis.call('ZRANGE', line, 0, 0)
  if #first == 0 then
    redis.call('SREM', lines, lineId)
    return false
  end
  if rank == 0 then return first[1] end
  return false
end
local function unlease(req, leases, id)
  redis.call('HDEL', req, 'runner')
  redis.call('HDEL', leases, id)
end
local function unpend(pend, pendb, id)
  if redis.call('ZREM', pend, id) == 1 then
    local size = tonumber(redis.call('HGET', pendb, id) or '0')
    redis.call('HDEL', pendb, id)
    redis.call('HINCRBY', pendb, '#', -size)
  end
end
-- Entries older than a queued record's life are of records that expired unfinished.
local function trimPending(pend, pendb, before)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', pend, '-inf', '(' .. before)) do unpend(pend, pendb, id) end
end
local function join(line, lines, seq, lineId, ticket, place, band)
  if place == 'front' then
    local first = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES')
    local score = first[2] and tonumber(first[2]) - 1 or redis.call('INCR', seq)
    if first[1] ~= ticket then redis.call('ZADD', line, score, ticket) end
  elseif not redis.call('ZSCORE', line, ticket) then
    redis.call('ZADD', line, redis.call('INCR', seq) + (tonumber(band) or 0), ticket)
  end
  redis.call('SADD', lines, lineId)
  return redis.call('ZRANK', line, ticket)
end
`

// KEYS: line, lines, seq  ARGV: lineId, ticket, place, band (priority/classes.ts bandOf)
const JOIN = script(`return join(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3], ARGV[4])`)

// KEYS: line, lines  ARGV: lineId, ticket
const LEAVE_LINE = script(`return leave(KEYS[1], KEYS[2], ARGV[1], ARGV[2])`)

// KEYS: line, lines  ARGV: lineId. Drops an empty line from the set (a join may have raced the sweep).
const FORGET_IF_EMPTY = script(`
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[1]) end
return 1`)

// KEYS: req, body, line, lines, seq, leases, pend, pendb, kept
// ARGV: id, lineId, ticket, meta, createdAt, lifeMs, trimBefore, hasBody, body, runner, lease,
//       payload, size, maxRequests, maxBytes ('' for no cap), band (a batch's line: priority/classes.ts),
//       keepIdMs ('' for none: the id is kept that long, past its record; QueueStore.submit)
// Returns {rank}, {-1} (the id exists, or was kept) or {-2, requests, bytes} (at a cap).
const SUBMIT = script(`
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[9]) == 1 then return {-1} end
trimPending(KEYS[7], KEYS[8], ARGV[7])
local count = redis.call('ZCARD', KEYS[7])
local bytes = tonumber(redis.call('HGET', KEYS[8], '#') or '0')
local size = tonumber(ARGV[13])
if ARGV[14] ~= '' and (count + 1 > tonumber(ARGV[14]) or bytes + size > tonumber(ARGV[15])) then return {-2, count, bytes} end
redis.call('ZADD', KEYS[7], ARGV[5], ARGV[1])
redis.call('HSET', KEYS[8], ARGV[1], size)
redis.call('HINCRBY', KEYS[8], '#', size)
redis.call('PEXPIRE', KEYS[7], ARGV[6])
redis.call('PEXPIRE', KEYS[8], ARGV[6])
redis.call('HSET', KEYS[1], 'meta', ARGV[4], 'payload', ARGV[12], 'status', 'queued', 'attempts', 0, 'cancel', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if ARGV[17] ~= '' then redis.call('SET', KEYS[9], '1', 'PX', ARGV[17]) end
if ARGV[8] == '1' then redis.call('SET', KEYS[2], ARGV[9], 'PX', ARGV[6]) end
local rank = join(KEYS[3], KEYS[4], KEYS[5], ARGV[2], ARGV[3], 'back', ARGV[16])
if rank == 0 and ARGV[10] ~= '' then
  redis.call('HSET', KEYS[1], 'runner', ARGV[10])
  redis.call('HSET', KEYS[6], ARGV[1], ARGV[11])
end
return {rank}`)

// KEYS: pend, pendb  ARGV: trimBefore
const PENDING = script(`
trimPending(KEYS[1], KEYS[2], ARGV[1])
return {redis.call('ZCARD', KEYS[1]), tonumber(redis.call('HGET', KEYS[2], '#') or '0')}`)

// KEYS: req, line, lines  ARGV: lineId, ticket, now, runner
const START = script(`
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'queued' and st ~= 'in_progress' then return {0} end
if redis.call('HGET', KEYS[1], 'cancel') == '1' then return {0} end
if (redis.call('HGET', KEYS[1], 'runner') or '') ~= ARGV[4] then return {0} end
redis.call('HSET', KEYS[1], 'status', 'in_progress')
redis.call('HSETNX', KEYS[1], 'startedAt', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
return {1, leave(KEYS[2], KEYS[3], ARGV[1], ARGV[2])}`)

// KEYS: req, line, lines, seq  ARGV: lineId, ticket
const REQUEUE = script(`
if redis.call('HGET', KEYS[1], 'status') ~= 'in_progress' then return -1 end
redis.call('HSET', KEYS[1], 'status', 'queued')
return join(KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], 'front')`)

// KEYS: req, res, body, line, lines, leases, pend, pendb  ARGV: lineId, ticket, status, now, result, resultTtlMs, lifeMs, id
export const FINISH = script(`
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'queued' and st ~= 'in_progress' then return {0} end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'finishedAt', ARGV[4])
redis.call('HDEL', KEYS[1], 'payload')
unlease(KEYS[1], KEYS[6], ARGV[8])
unpend(KEYS[7], KEYS[8], ARGV[8])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('DEL', KEYS[3])
if ARGV[5] ~= '' then redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[6]) end
return {1, leave(KEYS[4], KEYS[5], ARGV[1], ARGV[2])}`)

// KEYS: req, body, line, lines, leases, pend, pendb  ARGV: lineId, ticket, now, lifeMs, id
const CANCEL = script(`
local st = redis.call('HGET', KEYS[1], 'status')
if not st then return {''} end
if st == 'queued' then
  redis.call('HSET', KEYS[1], 'status', 'cancelled', 'finishedAt', ARGV[3])
  redis.call('HDEL', KEYS[1], 'payload')
  unlease(KEYS[1], KEYS[5], ARGV[5])
  unpend(KEYS[6], KEYS[7], ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('DEL', KEYS[2])
  return {st, leave(KEYS[3], KEYS[4], ARGV[1], ARGV[2])}
end
if st == 'in_progress' then redis.call('HSET', KEYS[1], 'cancel', 1) end
return {st}`)

// KEYS: req, leases  ARGV: id, runner. Ends the runner's lease; an entry whose record no
// longer names a runner (finished, or gone) is dropped from the hash on the way.
const RELEASE = script(`
local runner = redis.call('HGET', KEYS[1], 'runner')
if runner == ARGV[2] then
  unlease(KEYS[1], KEYS[2], ARGV[1])
  return 1
end
if not runner then redis.call('HDEL', KEYS[2], ARGV[1]) end
return 0`)

/** How many lines the sweep looks at per round trip. */
const SWEEP_BATCH = 200
/** Dead tickets taken from the head of one line per sweep, at most. */
const SWEEP_DEPTH = 100
/** Requests of an owner's index whose status a list reads per round trip. */
const LIST_BATCH = 500
/** The fields of a record a list shows (not its payload). */
const SUMMARY_FIELDS = ['meta', 'status', 'attempts', 'startedAt', 'finishedAt', 'cancel', 'runner'] as const

/**
 * The keys of one shard (or of the unsharded layout) under `namespace`, and the global
 * ones (owner, alive, sweep), which only the `{tg}` namespace's are used for.
 */
export function queueKeys(namespace: string) {
  const base = `${namespace}q:`
  return {
    base,
    line: (line: string) => `${base}line:${line}`,
    lines: `${base}lines`,
    seq: `${base}seq`,
    request: (id: string) => `${base}req:${id}`,
    result: (id: string) => `${base}res:${id}`,
    body: (id: string) => `${base}body:${id}`,
    /** A request id kept past its record (QueueStore.submit keepIdUntil): never submitted again. */
    kept: (id: string) => `${base}kept:${id}`,
    owner: (owner: string) => `${base}owner:${encodeURIComponent(owner)}`,
    pending: (keyId: string) => `${base}pend:${encodeURIComponent(keyId)}`,
    pendingBytes: (keyId: string) => `${base}pendb:${encodeURIComponent(keyId)}`,
    alive: (instance: string) => `${base}alive:${instance}`,
    leases: `${base}leases`,
    sweep: `${base}sweep`,
  }
}

type Keys = ReturnType<typeof queueKeys>

/** The key of request `id`'s record (for tests and benches that read it raw). */
export function queuedRequestKey(prefix: string, id: string): string {
  return queueShards(prefix, 1).ofId(id).request(id)
}

/** The shards of a queue store: where each request, line and key lives. */
export function queueShards(prefix: string, shards: number) {
  if (!Number.isInteger(shards) || shards < 1)
    throw new RangeError(`queue shards must be a whole number >= 1, not ${shards}`)
  const global = queueKeys(redisNamespace(prefix))
  const current = Array.from({ length: shards }, (_, n) => queueKeys(queueShardNamespace(prefix, n)))
  // A shard past queue.shards: one it was lowered from, or an id someone made up (not kept).
  const shard = (n: number): Keys => current[n] ?? queueKeys(queueShardNamespace(prefix, n))
  const ofKey = (keyId: string): number => shardOfKey(keyId, shards)
  return {
    /** Owner indexes, heartbeats, the sweep's lock. */
    global,
    /** Every shard, the unsharded layout first: what the sweep, lines and leases go over. */
    all: [global, ...current],
    /** Where request `id` lives (an id without a shard: the unsharded layout). */
    ofId: (id: string): Keys => {
      const n = shardOfId(id)
      return n === null ? global : shard(n)
    },
    /** Where a key's new requests and the drop-in calls of its lines go. */
    ofKey: (keyId: string): Keys => shard(ofKey(keyId)),
    /** Where a ticket waits in `line`: a stored request beside its record, a call on its key's shard. */
    ofTicket: (line: string, ticket: Ticket): Keys => {
      if (ticket.kind === 'call') return shard(ofKey(parseLine(line).keyId))
      const n = shardOfId(ticket.id)
      return n === null ? global : shard(n)
    },
    newId: (keyId: string): string => newRequestId(ofKey(keyId)),
  }
}

/** A lease entry: what a RequestRef needs besides the id. */
function encodeLease(request: RequestRef): string {
  return `${request.createdAt}\n${request.line}`
}

function decodeLease(id: string, value: string): RequestRef | null {
  const cut = value.indexOf('\n')
  const createdAt = Number(value.slice(0, cut))
  return cut === -1 || !Number.isFinite(createdAt) ? null : { id, line: value.slice(cut + 1), createdAt }
}

function ticketOrNull(value: unknown): Ticket | null {
  return typeof value === 'string' ? decodeTicket(value) : null
}

export function createRedisQueueStore(
  redis: RedisConnection,
  prefix: string,
  retention: StoreRetention,
  shards = 1,
): QueueStore {
  const space = queueShards(prefix, shards)
  const g = space.global
  const ttl = retention.resultTtlMs
  // A record lives as long as its result and as long again (reading "expired"); a request
  // still queued after its result's time would be up expires unrun (see the worker).
  const finishedLife = 2 * ttl
  const queuedLife = 3 * ttl

  const io = <T>(fn: () => Promise<T>): Promise<T> => withRedis(redis, fn)
  const run = (s: Script, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> =>
    runScript(redis, s, keys, args)

  function rankOf(reply: unknown): number {
    if (typeof reply !== 'number' || reply < 0) throw new TypeError(`queue script answered ${JSON.stringify(reply)}`)
    return reply
  }

  async function leave(k: Keys, line: string, ticket: Ticket): Promise<Ticket | null> {
    return ticketOrNull(await run(LEAVE_LINE, [k.line(line), k.lines], [line, encodeTicket(ticket)]))
  }

  type Pipeline = ReturnType<typeof redis.pipeline>

  /**
   * Per id, the replies of the commands `add` puts on a pipeline for it (`per` of them), in
   * one round trip per shard: a cluster takes a pipeline only within one slot's node.
   */
  async function perId(
    ids: readonly string[],
    per: number,
    add: (pipeline: Pipeline, k: Keys, id: string) => void,
  ): Promise<unknown[][]> {
    const groups = new Map<Keys, number[]>()
    ids.forEach((id, i) => {
      const k = space.ofId(id)
      const group = groups.get(k)
      if (group === undefined) groups.set(k, [i])
      else group.push(i)
    })
    const out: unknown[][] = ids.map(() => [])
    await Promise.all(
      [...groups].map(async ([k, at]) => {
        const pipeline = redis.pipeline()
        for (const i of at) add(pipeline, k, ids[i] ?? '')
        const replies = (await pipeline.exec()) ?? []
        at.forEach((i, n) => {
          const mine: unknown[] = []
          for (let j = 0; j < per; j++) {
            const [error, value] = replies[n * per + j] ?? [null, null]
            if (error) throw error
            mine.push(value)
          }
          out[i] = mine
        })
      }),
    )
    return out
  }

  /** Per id, what `fields` reads of its record (one command on the pipeline) and its result. */
  async function readWithResults(
    ids: readonly string[],
    fields: (pipeline: Pipeline, key: string) => void,
  ): Promise<Array<readonly [unknown, string | null]>> {
    if (ids.length === 0) return []
    const replies = await perId(ids, 2, (pipeline, k, id) => {
      fields(pipeline, k.request(id))
      pipeline.get(k.result(id))
    })
    return replies.map(([read, result]) => [read ?? null, (result ?? null) as string | null] as const)
  }

  async function readMany(ids: readonly string[]): Promise<Array<QueuedRequest | null>> {
    const read = await readWithResults(ids, (pipeline, key) => {
      pipeline.hgetall(key)
    })
    return ids.map((id, i) => {
      const [fields, result] = read[i] ?? [null, null]
      return decodeRecord(id, fields as Record<string, string> | null, result)
    })
  }

  /** Records without their payload (a list's). */
  async function readSummaries(ids: readonly string[]): Promise<Array<RequestSummary | null>> {
    const read = await readWithResults(ids, (pipeline, key) => {
      pipeline.hmget(key, ...SUMMARY_FIELDS)
    })
    return ids.map((id, i) => {
      const [values, result] = read[i] ?? [null, null]
      const fields = Object.fromEntries(
        SUMMARY_FIELDS.map((name, j) => [name, (values as Array<string | null>)[j] ?? null]),
      )
      return decodeSummary(id, fields, result)
    })
  }

  /**
   * The next `wanted` ids of an owner's index from `start` (newest first) whose status a
   * client sees as `status` (any, without): the index is read in batches with only each
   * record's status and finish time, never the payload. Ids whose records are gone are
   * dropped from the index on the way.
   */
  async function matching(
    index: string,
    start: number,
    wanted: number,
    status: RequestStatus | undefined,
  ): Promise<string[]> {
    const found: string[] = []
    const now = Date.now()
    for (let at = start; found.length < wanted;) {
      const batch = status === undefined ? wanted - found.length : LIST_BATCH
      const entries = await redis.zrevrange(index, at, at + batch - 1, 'WITHSCORES')
      const ids = entries.filter((_, i) => i % 2 === 0)
      if (ids.length === 0) break
      const replies = await perId(ids, 1, (pipeline, k, id) => {
        pipeline.hmget(k.request(id), 'status', 'finishedAt')
      })
      const gone: string[] = []
      for (const [i, id] of ids.entries()) {
        const [stored, finishedAt] = (replies[i]?.[0] ?? []) as Array<string | null>
        if (stored === null || stored === undefined) {
          gone.push(id)
          continue
        }
        const seen = statusAt(
          {
            status: storedStatus(stored),
            createdAt: Number(entries[2 * i + 1]),
            finishedAt: finishedAt === null || finishedAt === undefined ? null : Number(finishedAt),
          },
          now,
          ttl,
        )
        if ((status === undefined || seen === status) && found.length < wanted) found.push(id)
      }
      if (gone.length > 0) await redis.zrem(index, ...gone)
      // What was dropped moved the rest of the index up.
      at += ids.length - gone.length
      if (ids.length < batch) break
    }
    return found
  }

  /** A shard's lines with someone in them, with their depth and head. */
  async function linesOf(k: Keys): Promise<LineSummary[]> {
    const ids = await redis.smembers(k.lines)
    const out: LineSummary[] = []
    for (let i = 0; i < ids.length; i += SWEEP_BATCH) {
      const group = ids.slice(i, i + SWEEP_BATCH)
      const pipeline = redis.pipeline()
      for (const line of group) {
        pipeline.zcard(k.line(line))
        pipeline.zrange(k.line(line), '0', '0')
      }
      const replies = (await pipeline.exec()) ?? []
      group.forEach((line, j) => {
        const depth = Number(replies[2 * j]?.[1] ?? 0)
        const first = replies[2 * j + 1]?.[1]
        if (depth > 0)
          out.push({ line, ...parseLine(line), depth, head: Array.isArray(first) ? ticketOrNull(first[0]) : null })
      })
    }
    return out
  }

  /** Sweeps a shard's lines: dead heads out; returns the heads left. */
  async function sweepShard(k: Keys): Promise<Array<{ line: string; head: Ticket }>> {
    const heads: Array<{ line: string; head: Ticket }> = []
    const ids = await redis.smembers(k.lines)
    for (let i = 0; i < ids.length; i += SWEEP_BATCH) {
      const group = ids.slice(i, i + SWEEP_BATCH)
      const pipeline = redis.pipeline()
      for (const line of group) pipeline.zrange(k.line(line), '0', '0')
      const replies = (await pipeline.exec()) ?? []
      for (const [j, line] of group.entries()) {
        const first = replies[j]?.[1]
        let head = Array.isArray(first) ? ticketOrNull(first[0]) : null
        if (head === null) {
          await run(FORGET_IF_EMPTY, [k.line(line), k.lines], [line])
          continue
        }
        for (let n = 0; head !== null && n < SWEEP_DEPTH; n++) {
          const served = head.kind === 'call' ? g.alive(head.instance) : space.ofId(head.id).request(head.id)
          if ((await redis.exists(served)) === 1) break
          // Nobody will serve it: its gateway stopped, or its record is gone.
          const removed: Ticket = head
          head = await leave(k, line, removed)
          if (head === null) head = ticketOrNull((await redis.zrange(k.line(line), '0', '0'))[0])
        }
        if (head !== null) heads.push({ line, head })
      }
    }
    return heads
  }

  /** A shard's leases, entries of finished or gone records dropped on the way. */
  async function leasesOf(k: Keys): Promise<Lease[]> {
    const entries = Object.entries(await redis.hgetall(k.leases))
    if (entries.length === 0) return []
    const runners = await Promise.all(entries.map(([id]) => redis.hget(k.request(id), 'runner')))
    const alive = await Promise.all(runners.map((runner) => (runner === null ? 0 : redis.exists(g.alive(runner)))))
    const out: Lease[] = []
    for (const [i, [id, encoded]] of entries.entries()) {
      const runner = runners[i]
      const request = decodeLease(id, encoded)
      // Its record is finished or gone: the entry is dropped (nothing is leased).
      if (runner === null || runner === undefined || request === null)
        await run(RELEASE, [k.request(id), k.leases], [id, ''])
      else out.push({ request, runner, alive: alive[i] === 1 })
    }
    return out
  }

  return {
    kind: 'redis',

    newId: (keyId) => space.newId(keyId),

    join: (line, ticket, place = 'back', band = 0) =>
      io(async () => {
        const k = space.ofTicket(line, ticket)
        return rankOf(
          await run(JOIN, [k.line(line), k.lines, k.seq], [line, encodeTicket(ticket), place, String(band)]),
        )
      }),

    leave: (line, ticket) => io(() => leave(space.ofTicket(line, ticket), line, ticket)),

    // The key's shard: a line left over from the unsharded layout has its heads nudged by the sweep.
    head: (line) =>
      io(async () => ticketOrNull((await redis.zrange(space.ofKey(parseLine(line).keyId).line(line), '0', '0'))[0])),

    position: (line, ticket) => io(() => redis.zrank(space.ofTicket(line, ticket).line(line), encodeTicket(ticket))),

    lines: () => io(async () => (await Promise.all(space.all.map(linesOf))).flat()),

    sweep: (intervalMs) =>
      io(async () => {
        if ((await redis.set(g.sweep, '1', 'PX', intervalMs, 'NX')) !== 'OK') return null
        const heads: Array<{ line: string; head: Ticket }> = []
        for (const k of space.all) heads.push(...(await sweepShard(k)))
        return heads
      }),

    heartbeat: (instance, ttlMs) =>
      io(async () => {
        await redis.set(g.alive(instance), '1', 'PX', ttlMs)
      }),

    isAlive: (instance) => io(async () => (await redis.exists(g.alive(instance))) === 1),

    submit: (request, body, runner = '', caps, keepIdUntil) =>
      io(async () => {
        const k = space.ofId(request.id)
        const ticket = encodeTicket(jobTicket(request))
        const meta = encodeMeta(request)
        const payload = encodePayload(request)
        const size = storedSize(meta, payload, body)
        // The owner's index first (on {tg}): a list drops an entry whose record never came,
        // but would never show a record it has no entry for.
        const index = g.owner(request.owner)
        await redis
          .multi()
          .zadd(index, request.createdAt, request.id)
          .zremrangebyscore(index, '-inf', `(${request.createdAt - queuedLife}`)
          .pexpire(index, queuedLife)
          .exec()
        const reply = (await run(
          SUBMIT,
          [
            k.request(request.id),
            k.body(request.id),
            k.line(request.line),
            k.lines,
            k.seq,
            k.leases,
            k.pending(request.keyId),
            k.pendingBytes(request.keyId),
            k.kept(request.id),
          ],
          [
            request.id,
            request.line,
            ticket,
            meta,
            request.createdAt,
            queuedLife,
            request.createdAt - queuedLife,
            body === null ? '0' : '1',
            body ?? '',
            runner,
            encodeLease(request),
            payload,
            size,
            caps?.requests ?? '',
            caps?.bytes ?? '',
            String(storedBand(request.call)),
            keepIdUntil === undefined ? '' : Math.max(1, Math.ceil(keepIdUntil - Date.now())),
          ],
        )) as unknown[]
        if (reply[0] === -1) throw new RequestTakenError(request.id)
        if (reply[0] === -2) throw new QueueFullError({ requests: Number(reply[1]), bytes: Number(reply[2]) }, size)
        return rankOf(reply[0])
      }),

    pending: (keyId) =>
      io(async () => {
        const k = space.ofKey(keyId)
        const reply = (await run(
          PENDING,
          [k.pending(keyId), k.pendingBytes(keyId)],
          [Date.now() - queuedLife],
        )) as unknown[]
        return { requests: Number(reply[0]), bytes: Number(reply[1]) }
      }),

    get: (id) => io(async () => (await readMany([id]))[0] ?? null),

    body: (id) => io(() => redis.getBuffer(space.ofId(id).body(id))),

    list: (owner, page) =>
      io(async () => {
        const index = g.owner(owner)
        let start = 0
        if (page.after !== undefined) {
          const rank = await redis.zrevrank(index, page.after)
          if (rank === null) return { data: [], hasMore: false }
          start = rank + 1
        }
        // One match past the page says whether more match.
        const ids = await matching(index, start, page.limit + 1, page.status)
        const shown = ids.slice(0, page.limit)
        const data = (await readSummaries(shown)).filter((r): r is RequestSummary => r !== null)
        return { data, hasMore: ids.length > page.limit }
      }),

    start: (request, now, runner = '') =>
      io(async () => {
        const { id } = request
        const k = space.ofId(id)
        const reply = (await run(
          START,
          [k.request(id), k.line(request.line), k.lines],
          [request.line, encodeTicket(jobTicket(request)), now, runner],
        )) as unknown[]
        return { started: reply[0] === 1, next: ticketOrNull(reply[1]) }
      }),

    release: (request, runner) =>
      io(async () => {
        const k = space.ofId(request.id)
        return (await run(RELEASE, [k.request(request.id), k.leases], [request.id, runner])) === 1
      }),

    leases: () => io(async () => (await Promise.all(space.all.map(leasesOf))).flat()),

    requeue: (request) =>
      io(async () => {
        const k = space.ofId(request.id)
        const reply = await run(
          REQUEUE,
          [k.request(request.id), k.line(request.line), k.lines, k.seq],
          [request.line, encodeTicket(jobTicket(request))],
        )
        return typeof reply === 'number' && reply >= 0
      }),

    finish: (request, status: FinalStatus, result, now) =>
      io(async () => {
        const { id } = request
        const k = space.ofId(id)
        const { keyId } = parseLine(request.line)
        const reply = (await run(
          FINISH,
          [
            k.request(id),
            k.result(id),
            k.body(id),
            k.line(request.line),
            k.lines,
            k.leases,
            k.pending(keyId),
            k.pendingBytes(keyId),
          ],
          [
            request.line,
            encodeTicket(jobTicket(request)),
            status,
            now,
            result === null ? '' : encodeResult(result),
            ttl,
            finishedLife,
            id,
          ],
        )) as unknown[]
        return { finished: reply[0] === 1, next: ticketOrNull(reply[1]) }
      }),

    cancel: (request, now) =>
      io(async () => {
        const { id } = request
        const k = space.ofId(id)
        const { keyId } = parseLine(request.line)
        const reply = (await run(
          CANCEL,
          [k.request(id), k.body(id), k.line(request.line), k.lines, k.leases, k.pending(keyId), k.pendingBytes(keyId)],
          [request.line, encodeTicket(jobTicket(request)), now, finishedLife, id],
        )) as unknown[]
        const was = reply[0] === '' ? null : (reply[0] as RequestStatus)
        return { was, next: ticketOrNull(reply[1]) }
      }),

    ping: () => pingRedis(redis, `${g.base}ping`),

    close: () => closeRedis(redis),
  }
}
