// The file quota on Redis, shared by every instance. Keys live under `<prefix>{tg}:fq:`
// (Tollgate's one hash tag, so a cluster keeps them on one slot):
//
//   files:<key>    hash: file id → bytes, of the files the key uploaded
//   total:<key>    hash: n (files) and b (bytes) of them
//   holds:<key>    hash: hold → "<bytes>:<until ms>", uploads in flight
//   of:<file id>   the key that uploaded the file (a delete may come from another key of its owner)
//
// Adding a hold is one script that reads the totals and the (few) holds and adds it only
// under the caps.
import { closeRedis, type RedisConnection } from '../store/redis-client.ts'
import { redisNamespace, runScript, script, withRedis, type Script } from '../store/redis-kit.ts'
import type { FileQuotaStore } from './quota-port.ts'

// KEYS: total, holds  ARGV: now. Drops lapsed holds; returns files and bytes (holds included).
const USAGE = `
local function usage(total, holds, now)
  local files = tonumber(redis.call('HGET', total, 'n') or '0')
  local bytes = tonumber(redis.call('HGET', total, 'b') or '0')
  local all = redis.call('HGETALL', holds)
  for i = 1, #all, 2 do
    local size, untilMs = string.match(all[i + 1], '^(%d+):(%d+)$')
    if not size or tonumber(untilMs) <= now then
      redis.call('HDEL', holds, all[i])
    else
      files = files + 1
      bytes = bytes + tonumber(size)
    end
  end
  return files, bytes
end
`

const READ = script(`${USAGE}
local files, bytes = usage(KEYS[1], KEYS[2], tonumber(ARGV[1]))
return {files, bytes}`)

// KEYS: total, holds  ARGV: now, hold, bytes, holdMs, maxFiles, maxBytes
const HOLD = script(`${USAGE}
local now = tonumber(ARGV[1])
local files, bytes = usage(KEYS[1], KEYS[2], now)
if files + 1 > tonumber(ARGV[5]) or bytes + tonumber(ARGV[3]) > tonumber(ARGV[6]) then return {0, files, bytes} end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3] .. ':' .. (now + tonumber(ARGV[4])))
return {1}`)

// KEYS: files, total, holds, of  ARGV: hold, fileId, bytes, keyId
const COMMIT = script(`
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('HINCRBY', KEYS[2], 'b', ARGV[3])
end
redis.call('SET', KEYS[4], ARGV[4])
return 1`)

// KEYS: holds  ARGV: hold
const CANCEL = script(`redis.call('HDEL', KEYS[1], ARGV[1])
return 1`)

// KEYS: files, total, of  ARGV: fileId
const RELEASE = script(`
local size = redis.call('HGET', KEYS[1], ARGV[1])
if size then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'n', -1)
  redis.call('HINCRBY', KEYS[2], 'b', -tonumber(size))
end
redis.call('DEL', KEYS[3])
return 1`)

export function fileQuotaKeys(prefix: string) {
  const base = `${redisNamespace(prefix)}fq:`
  const enc = encodeURIComponent
  return {
    files: (keyId: string) => `${base}files:${enc(keyId)}`,
    total: (keyId: string) => `${base}total:${enc(keyId)}`,
    holds: (keyId: string) => `${base}holds:${enc(keyId)}`,
    of: (fileId: string) => `${base}of:${enc(fileId)}`,
  }
}

export function createRedisFileQuotaStore(
  redis: RedisConnection,
  prefix: string,
  now: () => number = Date.now,
): FileQuotaStore {
  const k = fileQuotaKeys(prefix)

  const run = (s: Script, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown[]> =>
    withRedis(redis, async () => (await runScript(redis, s, keys, args)) as unknown[])

  return {
    async hold(keyId, hold, bytes, caps, holdMs) {
      const reply = await run(
        HOLD,
        [k.total(keyId), k.holds(keyId)],
        [now(), hold, bytes, holdMs, caps.files, caps.bytes],
      )
      return reply[0] === 1
        ? { held: true }
        : { held: false, usage: { files: Number(reply[1]), bytes: Number(reply[2]) } }
    },
    async commit(keyId, hold, fileId, bytes) {
      await run(COMMIT, [k.files(keyId), k.total(keyId), k.holds(keyId), k.of(fileId)], [hold, fileId, bytes, keyId])
    },
    async cancel(keyId, hold) {
      await run(CANCEL, [k.holds(keyId)], [hold])
    },
    async release(fileId) {
      await withRedis(redis, async () => {
        const keyId = await redis.get(k.of(fileId))
        if (keyId !== null) await runScript(redis, RELEASE, [k.files(keyId), k.total(keyId), k.of(fileId)], [fileId])
      })
    },
    async usage(keyId) {
      const reply = await run(READ, [k.total(keyId), k.holds(keyId)], [now()])
      return { files: Number(reply[0]), bytes: Number(reply[1]) }
    },
    close: () => closeRedis(redis),
  }
}
