// The file quota on Redis, shared by every instance. A key's counts live on its own slot,
// `<prefix>{k:<keyId>}:fq:` (store/redis-kit.ts), so the uploads of many keys spread over a
// cluster's masters and each script touches one slot:
//
//   files    hash: file id → bytes, of the files the key uploaded
//   total    hash: n (files) and b (bytes) of them
//   holds    hash: hold → "<bytes>:<until ms>", uploads in flight
//
// and one global index, `<prefix>{tg}:fq:of:<file id>`: the key that uploaded the file (a
// delete may come from another key of its owner, and names only the file). It is written
// before the file is counted and removed after it is given back, so a crash in between
// leaves at worst an index entry that points at nothing.
//
// Adding a hold is one script that reads the totals and the (few) holds and adds it only
// under the caps. Counts kept under `{tg}` by a Tollgate before #25 are carried over by
// quota-migration.ts when a gateway starts.
import { closeRedis, type RedisConnection } from '../store/redis-client.ts'
import { identityNamespace, redisNamespace, runScript, script, withRedis, type Script } from '../store/redis-kit.ts'
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

// KEYS: files, total, holds  ARGV: hold, fileId, bytes
// Also what quota-migration.ts carries an old file over with (no hold: '').
export const COMMIT = script(`
if ARGV[1] ~= '' then redis.call('HDEL', KEYS[3], ARGV[1]) end
if redis.call('HSETNX', KEYS[1], ARGV[2], ARGV[3]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('HINCRBY', KEYS[2], 'b', ARGV[3])
end
return 1`)

// KEYS: holds  ARGV: hold
const CANCEL = script(`redis.call('HDEL', KEYS[1], ARGV[1])
return 1`)

// KEYS: files, total  ARGV: fileId
const RELEASE = script(`
local size = redis.call('HGET', KEYS[1], ARGV[1])
if size then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'n', -1)
  redis.call('HINCRBY', KEYS[2], 'b', -tonumber(size))
end
return 1`)

export function fileQuotaKeys(prefix: string) {
  const tg = `${redisNamespace(prefix)}fq:`
  const enc = encodeURIComponent
  const own = (keyId: string): string => `${identityNamespace(prefix, { keyId })}fq:`
  return {
    files: (keyId: string) => `${own(keyId)}files`,
    total: (keyId: string) => `${own(keyId)}total`,
    holds: (keyId: string) => `${own(keyId)}holds`,
    of: (fileId: string) => `${tg}of:${enc(fileId)}`,
    /** The `{tg}` layout of a Tollgate before #25 (quota-migration.ts). */
    old: {
      base: tg,
      files: (keyId: string) => `${tg}files:${enc(keyId)}`,
      total: (keyId: string) => `${tg}total:${enc(keyId)}`,
    },
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
      await withRedis(redis, () => redis.set(k.of(fileId), keyId))
      await run(COMMIT, [k.files(keyId), k.total(keyId), k.holds(keyId)], [hold, fileId, bytes])
    },
    async cancel(keyId, hold) {
      await run(CANCEL, [k.holds(keyId)], [hold])
    },
    async release(fileId) {
      await withRedis(redis, async () => {
        const keyId = await redis.get(k.of(fileId))
        if (keyId === null) return
        await runScript(redis, RELEASE, [k.files(keyId), k.total(keyId)], [fileId])
        // A file not carried over yet (a gateway of the old layout counted it meanwhile) goes
        // from there too, or the next migration would count a deleted file. Then the index.
        await runScript(redis, RELEASE, [k.old.files(keyId), k.old.total(keyId)], [fileId])
        await redis.del(k.of(fileId))
      })
    },
    async usage(keyId) {
      const reply = await run(READ, [k.total(keyId), k.holds(keyId)], [now()])
      return { files: Number(reply[0]), bytes: Number(reply[1]) }
    },
    close: () => closeRedis(redis),
  }
}
