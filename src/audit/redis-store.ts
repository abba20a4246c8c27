// The audit log shared by every instance on one Redis: one stream, `<prefix>{tg}:audit`,
// whose entry ids are the order and the record ids (`aud_<ms>-<seq>`). A stream is
// append-only by nature: XADD adds, XTRIM MINID is the retention, and nothing here
// changes or removes one entry. Each entry's id carries the record's own time (its `at`,
// from the writer's clock), raised to the stream's last id when a writer's clock is
// behind, so ids stay in order across instances.
//
// Each entry keeps the fields a query filters on beside the record's JSON, and a script
// filters inside Redis, newest first, so a filter that matches one record in thousands
// sends only that one back. A script call reads at most SCAN_BUDGET entries (Redis runs
// nothing else meanwhile); a longer search is continued by further calls.
import { redisNamespace, runScript, script, unexpected, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { AuditCursorError, type AuditStore } from './port.ts'
import type { AuditEntry, AuditQuery, NewAuditEntry } from './record.ts'

/** XADD at the record's time, or (a clock behind the stream's last id) wherever Redis puts it next. */
const APPEND = script(`
local fields = {'a', ARGV[2], 'n', ARGV[3], 'c', ARGV[4], 't', ARGV[5], 'o', ARGV[6], 'm', ARGV[1], 'e', ARGV[7]}
local ok, id = pcall(redis.call, 'XADD', KEYS[1], ARGV[1] .. '-*', unpack(fields))
if ok then return id end
return redis.call('XADD', KEYS[1], '*', unpack(fields))
`)

/**
 * Newest first from ARGV[1] (an XREVRANGE end) down to ARGV[2]: up to ARGV[3] entries that
 * pass the filters (ARGV[5..10]: actor, action, type, object id, since, until; '' is any),
 * reading at most ARGV[4] entries. Returns the matches (id, JSON, id, JSON, ...) and where
 * to go on from ('' when the range is done or enough were found).
 */
const FIND = script(`
local last, start = ARGV[1], ARGV[2]
local want, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local actor, action, otype, oid, since, untl = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
-- The first read is the page itself (every entry matches when nothing filters); then wider.
local found, n, scanned, batch = {}, 0, 0, math.max(want, 16)
while scanned < budget do
  local rows = redis.call('XREVRANGE', KEYS[1], last, start, 'COUNT', batch)
  for _, row in ipairs(rows) do
    local f, raw = {}, row[2]
    for i = 1, #raw, 2 do f[raw[i]] = raw[i + 1] end
    local at = tonumber(f.m)
    if (actor == '' or f.a == actor or f.n == actor) and (action == '' or f.c == action)
      and (otype == '' or f.t == otype) and (oid == '' or f.o == oid)
      and (since == '' or at >= tonumber(since)) and (untl == '' or at < tonumber(untl)) then
      found[#found + 1] = row[1]
      found[#found + 1] = f.e
      n = n + 1
      if n >= want then return {found, ''} end
    end
  end
  scanned = scanned + #rows
  if #rows < batch then return {found, ''} end
  last = '(' .. rows[#rows][1]
  batch = math.min(batch * 4, 1024)
end
return {found, last}
`)

const ID = /^aud_(\d{1,16}-\d{1,16})$/
/** Entries one script call reads at most. */
const SCAN_BUDGET = 5000

function entryOf(id: string, json: string): AuditEntry {
  return { id: `aud_${id}`, ...(JSON.parse(json) as NewAuditEntry) }
}

/** `redis` is the stores' connection (main.ts): closing the store leaves it open for them. */
export function createRedisAuditStore(redis: RedisConnection, prefix: string): AuditStore {
  const key = `${redisNamespace(prefix)}audit`
  return {
    kind: 'redis',

    append: (entry) =>
      withRedis(redis, async () => {
        const id = await runScript(
          redis,
          APPEND,
          [key],
          [
            String(Math.max(0, Math.floor(entry.at))),
            entry.actor.id,
            entry.actor.type === 'user' ? entry.actor.name : '',
            entry.action,
            entry.objectType,
            entry.objectId,
            JSON.stringify(entry),
          ],
        )
        if (typeof id !== 'string') throw unexpected('audit append', id)
        return { id: `aud_${id}`, ...entry }
      }),

    query: (q: AuditQuery) =>
      withRedis(redis, async () => {
        let end = '+'
        if (q.after !== undefined) {
          const id = ID.exec(q.after)?.[1]
          if (id === undefined) throw new AuditCursorError('not an audit id of this store')
          end = `(${id}`
        }
        // An entry's id is never earlier than its `at`: ids below `since` hold nothing asked for.
        const start = q.since === undefined ? '-' : String(q.since)
        const filters = [q.actor, q.action, q.objectType, q.objectId, q.since, q.until].map((v) =>
          v === undefined ? '' : String(v),
        )
        const found: AuditEntry[] = []
        // One past the page says whether there is more; each call goes on where the last stopped.
        for (let calls = 0; calls < 100_000; calls++) {
          const reply = await runScript(
            redis,
            FIND,
            [key],
            [end, start, q.limit + 1 - found.length, SCAN_BUDGET, ...filters],
          )
          if (!Array.isArray(reply) || !Array.isArray(reply[0]) || typeof reply[1] !== 'string')
            throw unexpected('audit find', reply)
          const pairs = reply[0] as string[]
          for (let i = 0; i + 1 < pairs.length; i += 2) found.push(entryOf(pairs[i] as string, pairs[i + 1] as string))
          if (reply[1] === '' || found.length > q.limit) break
          end = reply[1]
        }
        return { data: found.slice(0, q.limit), hasMore: found.length > q.limit }
      }),

    prune: (before) =>
      withRedis(redis, async () => {
        const removed = await redis.xtrim(key, 'MINID', String(Math.max(0, Math.floor(before))))
        return Number(removed)
      }),

    async close() {},
  }
}
