// Batches on Redis, shared by every instance. All under one slot (`<prefix>{tg}:bt:`),
// so each script touches one slot of a cluster:
//
//   rec:<id>      hash: r (the record, JSON), c (when a client asked to cancel)
//   lines:<id>    hash: line index → the line (JSON)
//   lease:<id>    string: the instance driving the batch, with its lease's time to live
//   owner:<owner> zset: an owner's batch ids by creation order
//   active        zset: unfinished batch ids by creation order
//   key:<keyId>   set: a key's unfinished batch ids (its cap)
//   seq           counter: creation order
import type { RedisConnection } from '../store/redis-client.ts'
import { closeRedis } from '../store/redis-client.ts'
import { redisNamespace, runScript, script, unexpected, withRedis } from '../store/redis-kit.ts'
import { isFinalBatch, type BatchLine, type BatchRecord, type BatchStore } from './port.ts'

// KEYS: rec, owner, active, key, seq  ARGV: id, record, maxActive
const CREATE = script(`
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[3]) then return 0 end
local seq = redis.call('INCR', KEYS[5])
redis.call('HSET', KEYS[1], 'r', ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
redis.call('ZADD', KEYS[3], seq, ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
return 1`)

// KEYS: lease  ARGV: instance, ttlMs
const LEASE = script(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0`)

// KEYS: lease  ARGV: instance
const UNLEASE = script(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`)

// KEYS: rec, lease, active, key  ARGV: record, holder ('' for any), id, final ('1' or '0')
// The runner's write, only while `holder` holds the lease when one is named.
const UPDATE = script(`
if ARGV[2] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1])
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('SREM', KEYS[4], ARGV[3])
end
return 1`)

// KEYS: rec  ARGV: now
const CANCEL = script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'c', ARGV[1])
return 1`)

export function createRedisBatchStore(redis: RedisConnection, prefix: string): BatchStore {
  const ns = `${redisNamespace(prefix)}bt:`
  const enc = encodeURIComponent
  const k = {
    rec: (id: string) => `${ns}rec:${enc(id)}`,
    lines: (id: string) => `${ns}lines:${enc(id)}`,
    lease: (id: string) => `${ns}lease:${enc(id)}`,
    owner: (owner: string) => `${ns}owner:${enc(owner)}`,
    key: (keyId: string) => `${ns}key:${enc(keyId)}`,
    active: `${ns}active`,
    seq: `${ns}seq`,
  }
  const stored = (record: BatchRecord): string => JSON.stringify({ ...record, cancelAt: null })
  async function read(id: string): Promise<BatchRecord | null> {
    const [r, c] = await redis.hmget(k.rec(id), 'r', 'c')
    if (r === null || r === undefined) return null
    const record = JSON.parse(r) as BatchRecord
    return { ...record, cancelAt: c === null || c === undefined ? null : Number(c) }
  }
  const run = <T>(fn: () => Promise<T>): Promise<T> => withRedis(redis, fn)
  return {
    kind: 'redis',
    create: (record, maxActive) =>
      run(async () => {
        const keys = [k.rec(record.id), k.owner(record.owner), k.active, k.key(record.keyId), k.seq]
        const reply = await runScript(redis, CREATE, keys, [record.id, stored(record), maxActive])
        if (reply !== 0 && reply !== 1) throw unexpected('batch create', reply)
        return reply === 1
      }),
    get: (id) => run(() => read(id)),
    list: (owner, { after, limit }) =>
      run(async () => {
        let max = '+inf'
        if (after !== undefined) {
          const score = await redis.zscore(k.owner(owner), after)
          if (score === null) return { data: [], hasMore: false }
          max = `(${score}`
        }
        const ids = await redis.zrevrangebyscore(k.owner(owner), max, '-inf', 'LIMIT', 0, limit + 1)
        const records = await Promise.all(ids.slice(0, limit).map(read))
        return { data: records.filter((r): r is BatchRecord => r !== null), hasMore: ids.length > limit }
      }),
    update: (id, patch, holder) =>
      run(async () => {
        const current = await read(id)
        if (current === null) return null
        const next: BatchRecord = { ...current, ...patch }
        const keys = [k.rec(id), k.lease(id), k.active, k.key(next.keyId)]
        const final = isFinalBatch(next.status) ? '1' : '0'
        const reply = await runScript(redis, UPDATE, keys, [stored(next), holder ?? '', id, final])
        if (reply !== 0 && reply !== 1) throw unexpected('batch update', reply)
        return reply === 1 ? next : null
      }),
    cancel: (id, now) =>
      run(async () => {
        await runScript(redis, CANCEL, [k.rec(id)], [now])
        return read(id)
      }),
    active: () => run(() => redis.zrange(k.active, '0', '-1')),
    lease: (id, instance, ttlMs) =>
      run(async () => (await runScript(redis, LEASE, [k.lease(id)], [instance, ttlMs])) === 1),
    unlease: (id, instance) =>
      run(async () => {
        await runScript(redis, UNLEASE, [k.lease(id)], [instance])
      }),
    putLines: (id, lines) =>
      run(async () => {
        for (let i = 0; i < lines.length; i += 500) {
          const fields = lines.slice(i, i + 500).flatMap((line) => [String(line.index), JSON.stringify(line)])
          await redis.hset(k.lines(id), ...(fields as [string, string]))
        }
      }),
    lines: (id) =>
      run(async () => {
        const all = await redis.hgetall(k.lines(id))
        return Object.values(all)
          .map((text) => JSON.parse(text) as BatchLine)
          .sort((a, b) => a.index - b.index)
      }),
    setLine: (id, index, patch) =>
      run(async () => {
        const text = await redis.hget(k.lines(id), String(index))
        if (text === null) return
        await redis.hset(k.lines(id), String(index), JSON.stringify({ ...(JSON.parse(text) as BatchLine), ...patch }))
      }),
    ping: () => run(async () => (await redis.ping()) === 'PONG'),
    close: () => closeRedis(redis),
  }
}
