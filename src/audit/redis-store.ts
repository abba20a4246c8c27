// The audit log shared by every instance on one Redis: one stream, `<prefix>{tg}:audit`,
// whose entry ids are the order and the record ids (`aud_<ms>-<seq>`). A stream is
// append-only by nature: XADD adds, XTRIM MINID is the retention, and nothing here
// changes or removes one entry. Each entry's id carries the record's own time (its `at`,
// from the writer's clock), raised to the stream's last id when a writer's clock is
// behind, so ids stay in order across instances.
//
// Filters run in memory over the stream read newest first, in batches: the audit log is
// written by people at human pace, and a time range bounds the read.
import { redisNamespace, runScript, script, unexpected, withRedis } from '../store/redis-kit.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { AuditCursorError, type AuditStore } from './port.ts'
import { matches, type AuditEntry, type NewAuditEntry } from './record.ts'

/** XADD at the record's time, or (a clock behind the stream's last id) wherever Redis puts it next. */
const APPEND = script(`
local ok, id = pcall(redis.call, 'XADD', KEYS[1], ARGV[1] .. '-*', 'e', ARGV[2])
if ok then return id end
return redis.call('XADD', KEYS[1], '*', 'e', ARGV[2])
`)

const ID = /^aud_(\d{1,16}-\d{1,16})$/
const BATCH = 200

type StreamEntry = [id: string, fields: string[]]

function entryOf([id, fields]: StreamEntry): AuditEntry {
  const at = fields.indexOf('e')
  const json = at === -1 ? undefined : fields[at + 1]
  if (json === undefined) throw unexpected('audit stream entry', fields)
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
          [String(Math.max(0, Math.floor(entry.at))), JSON.stringify(entry)],
        )
        if (typeof id !== 'string') throw unexpected('audit append', id)
        return { id: `aud_${id}`, ...entry }
      }),

    query: (q) =>
      withRedis(redis, async () => {
        let end = '+'
        if (q.after !== undefined) {
          const id = ID.exec(q.after)?.[1]
          if (id === undefined) throw new AuditCursorError('not an audit id of this store')
          end = `(${id}`
        }
        // An entry's id is never earlier than its `at`: ids below `since` hold nothing asked for.
        const start = q.since === undefined ? '-' : String(q.since)
        const found: AuditEntry[] = []
        for (;;) {
          const batch = (await redis.xrevrange(key, end, start, 'COUNT', BATCH)) as StreamEntry[]
          for (const raw of batch) {
            const entry = entryOf(raw)
            if (matches(entry, q)) found.push(entry)
            if (found.length > q.limit) return { data: found.slice(0, q.limit), hasMore: true }
          }
          const last = batch.at(-1)
          if (batch.length < BATCH || last === undefined) return { data: found, hasMore: false }
          end = `(${last[0]}`
        }
      }),

    prune: (before) =>
      withRedis(redis, async () => {
        const removed = await redis.xtrim(key, 'MINID', String(Math.max(0, Math.floor(before))))
        return Number(removed)
      }),

    async close() {},
  }
}
