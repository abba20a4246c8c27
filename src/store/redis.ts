// The stores on Redis, shared by any number of gateway instances.
//
// Keys are `<prefix>{tg}:…`, the one hash tag of global state, so the Lua scripts and MULTI
// blocks below are legal on a cluster; but usage rows written on every call's settle live
// with their owner (`<prefix>{o:<owner>}:…`, store/redis-kit.ts), so the fleet's settles
// spread over a cluster's masters (see "Usage rows" below). Each script declares every key
// it touches; where the keys to touch depend on the current value (a record's old hashes,
// an object's current owner), the client reads the value, passes the keys it implies and
// the value it expects, and the script applies only if the value is unchanged (else the
// client reads again, a bounded number of times). WATCH is avoided: it needs a connection
// of its own, and this client is shared.
import type { KeyRecord } from '../keys/record.ts'
import type {
  KeyFilter,
  KeyStore,
  OwnedKind,
  OwnershipStore,
  RememberedKind,
  Stores,
  StreamEntry,
  StreamJournal,
  UsageQuery,
  UsageRecord,
  UsageStore,
  UsageWrite,
} from './ports.ts'
import { StoreConflictError, StoreUnavailableError } from './errors.ts'
import {
  compareKeyRecords,
  decodeKeyRecord,
  encodeKeyRecord,
  hashesOf,
  matchesFilter,
  sameKeyRecord,
} from './key-records.ts'
import { redisAuthStores } from './redis-auth.ts'
import { closeRedis, isCluster, pingRedis, type RedisConnection } from './redis-client.ts'
import {
  identityNamespace,
  redisNamespace,
  runScript,
  script,
  unexpected,
  withRedis,
  type Identity,
  type Script,
} from './redis-kit.ts'
import { NANOS_PER_UNIT } from '../keys/money.ts'
import {
  checkStreamCharge,
  checkUsageQuery,
  checkUsageRecords,
  compareUsageRows,
  dayNumber,
  dayOf,
  RECOVERED_STREAM_TTL_MS,
  streamEntryValues,
} from './usage-rows.ts'

/** Rounds of read-then-compare-and-set before a write gives up under contention. */
const CAS_ATTEMPTS = 16
/** Commands per pipeline when reading many rows. */
const BATCH = 500

// KEYS: record, id set, hash keys…  ARGV: id, json
const INSERT_KEY = script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 'id' end
for i = 3, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then return 'hash' end
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[1]) end
return 'ok'
`)

// KEYS: record, old hash keys (ARGV[3] of them), new hash keys…
// ARGV: id, expected json, old hash count, new json
const REPLACE_KEY = script(`
local current = redis.call('GET', KEYS[1])
if not current then return 'missing' end
if current ~= ARGV[2] then return 'changed' end
local firstNew = tonumber(ARGV[3]) + 2
local kept = {}
for i = firstNew, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then return 'hash' end
  kept[KEYS[i]] = true
end
for i = 2, firstNew - 1 do
  if not kept[KEYS[i]] and redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
for i = firstNew, #KEYS do redis.call('SET', KEYS[i], ARGV[1]) end
redis.call('SET', KEYS[1], ARGV[4])
return 'ok'
`)

// KEYS: owner key, the owner's sorted set, sequence  ARGV: id, owner
const CLAIM = script(`
local current = redis.call('GET', KEYS[1])
if current then
  if current == ARGV[2] then return 'ok' end
  return 'taken'
end
local seq = redis.call('INCR', KEYS[3])
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], seq, ARGV[1])
return 'ok'
`)

// KEYS: owner key, the expected owner's sorted set  ARGV: expected owner, id
const RELEASE = script(`
local current = redis.call('GET', KEYS[1])
if not current then return 'ok' end
if current ~= ARGV[1] then return 'changed' end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
return 'ok'
`)

// KEYS: the remembered objects' owner keys  ARGV: owner, time to live in ms
// NX: an id already remembered keeps its owner (ids are the upstream's, unique).
const REMEMBER = script(`
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2], 'NX') end
return 'ok'
`)

// KEYS: every row's index, the stream journal's index, then per row: the row, its key's
// index, the journal entry of the stream it settles (when it settles one), and the write's
// marker (when it has an id).
// ARGV: how long a marker is kept (ms), then per row: requests, inputTokens, outputTokens,
// costNanos, keyId, model, day, owner, tier, day number, the stream it settles ('' for
// none), the write's id ('' for none).
// One script rather than a MULTI of nine commands a row: one command to send, encode and
// answer on every call's settle (and it joins the limiter's settle in one auto-pipelined write).
// Counts go in as the strings they arrive as, so HINCRBY sees integers, never Lua doubles;
// only a settle of a stream recovery charged already (rare) does arithmetic. A row whose
// id has a marker was applied before (its reply was lost): it is skipped, whole.
const ADD_USAGE = script(`
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local k = 3
for i = 0, (#ARGV - 1) / 12 - 1 do
  local a = 1 + 12 * i
  local row, ofKey = KEYS[k], KEYS[k + 1]
  k = k + 2
  local requests, input, output, cost = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local stream, id = ARGV[a + 11], ARGV[a + 12]
  local entry, marker
  if stream ~= '' then
    entry = KEYS[k]
    k = k + 1
  end
  if id ~= '' then
    marker = KEYS[k]
    k = k + 1
  end
  if not marker or redis.call('SET', marker, '1', 'NX', 'PX', ARGV[1]) then
    if entry then
      local got = redis.call('HMGET', entry, 'recovered', 'inputTokens', 'outputTokens', 'costNanos')
      if got[1] then
        local less = function(n, m) return string.format('%d', math.max(0, tonumber(n) - tonumber(m or '0'))) end
        requests, input, output, cost = less(requests, '1'), less(input, got[2]), less(output, got[3]), less(cost, got[4])
      end
      redis.call('DEL', entry)
      redis.call('HDEL', KEYS[2], stream)
    end
    redis.call('HINCRBY', row, 'requests', requests)
    redis.call('HINCRBY', row, 'inputTokens', input)
    redis.call('HINCRBY', row, 'outputTokens', output)
    redis.call('HINCRBY', row, 'costNanos', cost)
    redis.call('HSET', row, 'keyId', ARGV[a + 5], 'model', ARGV[a + 6], 'day', ARGV[a + 7], 'owner', ARGV[a + 8], 'tier', ARGV[a + 9], 'at', at)
    redis.call('ZADD', KEYS[1], ARGV[a + 10], row)
    redis.call('ZADD', ofKey, ARGV[a + 10], row)
  end
end
return 'ok'
`)

// Usage rows: a row per (key, model, day) is a hash on its owner's slot, written with the
// write's marker by ADD_OWNED_USAGE: one script per settle, on the owner's master. The
// indexes that find rows (every row's, and each key's) stay in `{tg}`, where a query by key
// needs no owner; a row goes into them only when the script says it is not there yet (its
// `ix` field unset): once per row, so per key, model and day, never per call. Until then a
// row is written but not found; a failure in between is retried by the meter under the
// write's id, which indexes it then.
// A call that settles a journalled stream still writes through ADD_USAGE to a row in `{tg}`
// (the journal is there, and its entry and the row change in one script), and rows written
// before rows moved (issue #25) stay in `{tg}` too: a query reads both layouts through the
// same indexes and sums the rows of one (key, model, day). Nothing to migrate.
//
// KEYS: per row: the row, then the write's marker (when it has an id).
// ARGV: how long a marker is kept (ms), then per row: requests, inputTokens, outputTokens,
// costNanos, keyId, model, day, owner, tier, the write's id ('' for none).
// Returns per row 1 when the row exists but is not yet in the indexes, else 0.
const ADD_OWNED_USAGE = script(`
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local out = {}
local k = 1
for i = 0, (#ARGV - 1) / 10 - 1 do
  local a = 1 + 10 * i
  local row = KEYS[k]
  k = k + 1
  local marker
  if ARGV[a + 10] ~= '' then
    marker = KEYS[k]
    k = k + 1
  end
  if not marker or redis.call('SET', marker, '1', 'NX', 'PX', ARGV[1]) then
    redis.call('HINCRBY', row, 'requests', ARGV[a + 1])
    redis.call('HINCRBY', row, 'inputTokens', ARGV[a + 2])
    redis.call('HINCRBY', row, 'outputTokens', ARGV[a + 3])
    redis.call('HINCRBY', row, 'costNanos', ARGV[a + 4])
    redis.call('HSET', row, 'keyId', ARGV[a + 5], 'model', ARGV[a + 6], 'day', ARGV[a + 7], 'owner', ARGV[a + 8],
      'tier', ARGV[a + 9], 'at', at)
  end
  if redis.call('EXISTS', row) == 1 and redis.call('HEXISTS', row, 'ix') == 0 then out[i + 1] = 1 else out[i + 1] = 0 end
end
return out
`)

/**
 * How long a usage write's id is remembered (UsageWrite.id): a write sent again within this
 * of its first try counts once. A marker is a small key per write (about 100 bytes: 60 MB
 * at 100 calls a second); a retry later than this, after an outage that began with that
 * write in flight, may count it twice.
 */
export const USAGE_WRITE_MEMORY_MS = 15 * 60_000

// KEYS: the entry, the journal's index
// ARGV: id, instance, keyId, owner, tier, model, at, inputTokens, outputTokens, costNanos
const OPEN_STREAM = script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 'ok' end
redis.call('HSET', KEYS[1], 'instance', ARGV[2], 'keyId', ARGV[3], 'owner', ARGV[4], 'tier', ARGV[5], 'model', ARGV[6],
  'at', ARGV[7], 'inputTokens', ARGV[8], 'outputTokens', ARGV[9], 'costNanos', ARGV[10])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 'ok'
`)

// KEYS: the entry  ARGV: at, inputTokens, outputTokens, costNanos
// Only raises: a checkpoint that arrives late never lowers a charge.
const CHECKPOINT_STREAM = script(`
local got = redis.call('HMGET', KEYS[1], 'recovered', 'inputTokens', 'outputTokens', 'costNanos')
if got[1] or not got[2] then return 'ok' end
local fields = { 'inputTokens', 'outputTokens', 'costNanos' }
for i = 1, 3 do
  if tonumber(ARGV[i + 1]) > tonumber(got[i + 1]) then redis.call('HSET', KEYS[1], fields[i], ARGV[i + 1]) end
end
redis.call('HSET', KEYS[1], 'at', ARGV[1])
return 'ok'
`)

// KEYS: the entry, the journal's index, every row's index, the row, its key's index
// ARGV: id, keyId, model, day, day number, ms a recovered entry is kept
// The client names the row from the entry as it read it; if a checkpoint moved the entry
// to another day meanwhile, it reads again ('changed').
const RECOVER_STREAM = script(`
local e = redis.call('HMGET', KEYS[1], 'recovered', 'keyId', 'model', 'at', 'inputTokens', 'outputTokens', 'costNanos', 'owner', 'tier')
if e[1] or not e[2] then return 'gone' end
if e[2] ~= ARGV[2] or e[3] ~= ARGV[3] or math.floor(tonumber(e[4]) / 86400000) ~= tonumber(ARGV[5]) then return 'changed' end
redis.call('HINCRBY', KEYS[4], 'requests', 1)
redis.call('HINCRBY', KEYS[4], 'inputTokens', e[5])
redis.call('HINCRBY', KEYS[4], 'outputTokens', e[6])
redis.call('HINCRBY', KEYS[4], 'costNanos', e[7])
redis.call('HSET', KEYS[4], 'keyId', ARGV[2], 'model', ARGV[3], 'day', ARGV[4], 'owner', e[8], 'tier', e[9])
redis.call('ZADD', KEYS[3], ARGV[5], KEYS[4])
redis.call('ZADD', KEYS[5], ARGV[5], KEYS[4])
redis.call('HSET', KEYS[1], 'recovered', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('HDEL', KEYS[2], ARGV[1])
return { e[5], e[6], e[7] }
`)

/** The key names of one namespace. Usage parts are URI-encoded so ':' in a model can't collide. */
export function redisKeys(prefix: string) {
  const base = redisNamespace(prefix)
  const enc = encodeURIComponent
  return {
    base,
    record: (id: string) => `${base}key:${id}`,
    hash: (hash: string) => `${base}keyhash:${hash}`,
    ids: `${base}keys`,
    owner: (kind: OwnedKind | RememberedKind, id: string) => `${base}own:${kind}:${id}`,
    owned: (kind: OwnedKind, owner: string) => `${base}owned:${kind}:${owner}`,
    ownedSeq: `${base}ownseq`,
    /** A row in `{tg}`: of a settled stream (the journal is there), or written before rows moved to their owner. */
    usageRow: (keyId: string, model: string, day: string) => `${base}usage:${day}:${enc(keyId)}:${enc(model)}`,
    /** A row on its owner's slot: what a call's settle writes. */
    ownerUsageRow: (identity: Identity, model: string, day: string) =>
      `${identityNamespace(prefix, identity)}usage:${day}:${enc(identity.keyId)}:${enc(model)}`,
    /** A write to an owner's row applied lately, by its id: on the row's slot. */
    ownerUsageWrite: (identity: Identity, id: string) => `${identityNamespace(prefix, identity)}uw:${enc(id)}`,
    /** Every usage row, scored by day number. */
    usageRows: `${base}usage:rows`,
    /** One key's usage rows, scored by day number. */
    usageRowsOfKey: (keyId: string) => `${base}usage:key:${enc(keyId)}`,
    /** A journalled stream (ports.ts StreamJournal). */
    stream: (id: string) => `${base}stream:${enc(id)}`,
    /** The journalled streams neither settled nor recovered: id → instance. */
    streams: `${base}streams`,
    /** A usage write to a row in `{tg}` applied lately (USAGE_WRITE_MEMORY_MS), by its id. */
    usageWrite: (id: string) => `${base}uw:${enc(id)}`,
  }
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}

/**
 * The stores on `redis`. Usage rows, written once per call, go on `settlements` when given:
 * a connection that sends the writes of one event-loop turn together (with the limiter's
 * settles of the same calls), so they cost one socket write rather than one each.
 */
/** A usage write's counts and labels, in the order both usage scripts read them. */
function rowArgs(r: UsageWrite): Array<string | number> {
  return [r.requests, r.inputTokens, r.outputTokens, r.costNanos, r.keyId, r.model, r.day, r.owner, r.tier]
}

export function createRedisStores(
  redis: RedisConnection,
  prefix: string,
  settlements: RedisConnection = redis,
): Stores {
  const k = redisKeys(prefix)

  const io = <T>(fn: () => Promise<T>): Promise<T> => withRedis(redis, fn)
  const run = (s: Script, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> =>
    runScript(redis, s, keys, args)

  /** Runs a pipeline or MULTI and returns its replies, throwing the first error among them. */
  async function replies(batch: { exec(): Promise<[Error | null, unknown][] | null> }): Promise<unknown[]> {
    const results = await batch.exec()
    if (results === null) throw unexpected('EXEC', null)
    return results.map(([error, value]) => {
      if (error) throw error
      return value
    })
  }

  function decodeOrNull(json: string | null): KeyRecord | null {
    return json === null ? null : decodeKeyRecord(json)
  }

  const keys: KeyStore = {
    insert: (record) =>
      io(async () => {
        const hashKeys = hashesOf(record).map(k.hash)
        const outcome = await run(
          INSERT_KEY,
          [k.record(record.id), k.ids, ...hashKeys],
          [record.id, encodeKeyRecord(record)],
        )
        if (outcome === 'id') throw new StoreConflictError(`key id ${record.id} already exists`)
        if (outcome === 'hash')
          throw new StoreConflictError(`a hash of key ${record.id} already belongs to another key`)
        if (outcome !== 'ok') throw unexpected('insert script', outcome)
      }),

    replace: (record, expected) =>
      io(async () => {
        if (record.id !== expected.id)
          throw new RangeError(`replace: expected record ${expected.id} is not record ${record.id}`)
        const recordKey = k.record(record.id)
        const newHashKeys = hashesOf(record).map(k.hash)
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const current = await redis.get(recordKey)
          if (current === null) return 'missing'
          const stored = decodeKeyRecord(current)
          if (!sameKeyRecord(stored, expected)) return 'stale'
          // The script applies only if the value is still this very text; if another write
          // lands in between, read again: the new value decides whether `expected` still holds.
          const oldHashKeys = hashesOf(stored).map(k.hash)
          const outcome = await run(
            REPLACE_KEY,
            [recordKey, ...oldHashKeys, ...newHashKeys],
            [record.id, current, oldHashKeys.length, encodeKeyRecord(record)],
          )
          if (outcome === 'ok') return 'replaced'
          if (outcome === 'missing') return 'missing'
          if (outcome === 'hash')
            throw new StoreConflictError(`a hash of key ${record.id} already belongs to another key`)
          if (outcome !== 'changed') throw unexpected('replace script', outcome)
        }
        throw new StoreConflictError(
          `key ${record.id} kept changing during replace; gave up after ${CAS_ATTEMPTS} attempts`,
        )
      }),

    get: (id) => io(async () => decodeOrNull(await redis.get(k.record(id)))),

    findByHash: (hash) =>
      io(async () => {
        const id = await redis.get(k.hash(hash))
        if (id === null) return null
        const record = decodeOrNull(await redis.get(k.record(id)))
        // A replace between the two reads may have dropped this hash: the record decides.
        return record !== null && hashesOf(record).includes(hash) ? record : null
      }),

    list: (filter: KeyFilter = {}) =>
      io(async () => {
        const ids = await redis.smembers(k.ids)
        const found: KeyRecord[] = []
        for (const group of chunks(ids, BATCH)) {
          const values = await redis.mget(...group.map(k.record))
          for (const json of values) {
            const record = decodeOrNull(json)
            if (record !== null && matchesFilter(record, filter)) found.push(record)
          }
        }
        return found.sort(compareKeyRecords)
      }),
  }

  const ownership: OwnershipStore = {
    claim: (kind, id, owner) =>
      io(async () => {
        const outcome = await run(CLAIM, [k.owner(kind, id), k.owned(kind, owner), k.ownedSeq], [id, owner])
        if (outcome === 'taken') throw new StoreConflictError(`${kind} ${id} already belongs to another owner`)
        if (outcome !== 'ok') throw unexpected('claim script', outcome)
      }),

    ownerOf: (kind, id) => io(() => redis.get(k.owner(kind, id))),

    list: (kind, owner) => io(() => redis.zrange(k.owned(kind, owner), '0', '-1')),

    release: (kind, id) =>
      io(async () => {
        const ownerKey = k.owner(kind, id)
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const owner = await redis.get(ownerKey)
          if (owner === null) return
          const outcome = await run(RELEASE, [ownerKey, k.owned(kind, owner)], [owner, id])
          if (outcome === 'ok') return
          if (outcome !== 'changed') throw unexpected('release script', outcome)
        }
        throw new StoreConflictError(
          `${kind} ${id} kept changing owner during release; gave up after ${CAS_ATTEMPTS} attempts`,
        )
      }),

    remember: (kind, ids, owner, ttlMs) =>
      io(async () => {
        if (ids.length === 0) return
        const outcome = await run(
          REMEMBER,
          ids.map((id) => k.owner(kind, id)),
          [owner, Math.max(1, Math.round(ttlMs))],
        )
        if (outcome !== 'ok') throw unexpected('remember script', outcome)
      }),
  }

  /** Writes of settled streams: one ADD_USAGE in `{tg}`, with the journal. */
  async function addJournalled(records: readonly UsageWrite[]): Promise<void> {
    const keys: string[] = [k.usageRows, k.streams]
    const args: Array<string | number> = [USAGE_WRITE_MEMORY_MS]
    for (const r of records) {
      keys.push(k.usageRow(r.keyId, r.model, r.day), k.usageRowsOfKey(r.keyId))
      if (r.stream !== undefined) keys.push(k.stream(r.stream))
      if (r.id !== undefined) keys.push(k.usageWrite(r.id))
      args.push(...rowArgs(r), dayNumber(r.day), r.stream ?? '', r.id ?? '')
    }
    // One script: the whole batch applies, and no reader sees half a row.
    await withRedis(settlements, async () => {
      const outcome = await runScript(settlements, ADD_USAGE, keys, args)
      if (outcome !== 'ok') throw unexpected('ADD_USAGE', outcome)
    })
  }

  /** Writes of one owner: one ADD_OWNED_USAGE on its slot; a new row is then indexed in `{tg}`. */
  async function addOwned(records: readonly UsageWrite[]): Promise<void> {
    const keys: string[] = []
    const args: Array<string | number> = [USAGE_WRITE_MEMORY_MS]
    const rows = records.map((r) => k.ownerUsageRow({ keyId: r.keyId, owner: r.owner }, r.model, r.day))
    for (const [i, r] of records.entries()) {
      keys.push(rows[i] ?? '')
      if (r.id !== undefined) keys.push(k.ownerUsageWrite({ keyId: r.keyId, owner: r.owner }, r.id))
      args.push(...rowArgs(r), r.id ?? '')
    }
    await withRedis(settlements, async () => {
      const reply = await runScript(settlements, ADD_OWNED_USAGE, keys, args)
      if (!Array.isArray(reply) || reply.length !== records.length) throw unexpected('ADD_OWNED_USAGE', reply)
      const fresh = records.flatMap((r, i) => (reply[i] === 1 ? [{ r, row: rows[i] ?? '' }] : []))
      if (fresh.length === 0) return
      const index = redis.multi()
      for (const { r, row } of fresh) {
        index.zadd(k.usageRows, dayNumber(r.day), row)
        index.zadd(k.usageRowsOfKey(r.keyId), dayNumber(r.day), row)
      }
      await replies(index)
      await Promise.all(fresh.map(({ row }) => redis.hset(row, 'ix', '1')))
    })
  }

  const usage: UsageStore = {
    add: async (records) => {
      checkUsageRecords(records)
      if (records.length === 0) return
      const groups = new Map<string, UsageWrite[]>()
      for (const r of records) {
        const slot = r.stream === undefined ? identityNamespace(prefix, { keyId: r.keyId, owner: r.owner }) : ''
        groups.set(slot, [...(groups.get(slot) ?? []), r])
      }
      // One write per slot (the meter sends one row; a retry may carry several owners').
      const outcomes = await Promise.allSettled(
        [...groups].map(([slot, rows]) => (slot === '' ? addJournalled(rows) : addOwned(rows))),
      )
      const failed = outcomes.find((o) => o.status === 'rejected')
      if (failed === undefined) return
      const error: unknown = failed.reason
      // Some slots took their rows: the batch is sent again under its ids, never folded anew.
      if (outcomes.some((o) => o.status === 'fulfilled') && error instanceof StoreUnavailableError && error.unsent)
        throw new StoreUnavailableError(error.message, { cause: error, unsent: false })
      throw error
    },

    query: async (query: UsageQuery) => {
      checkUsageQuery(query)
      return io(async () => {
        const index = query.keyId === undefined ? k.usageRows : k.usageRowsOfKey(query.keyId)
        const min = query.from === undefined ? '-inf' : dayNumber(query.from)
        const max = query.to === undefined ? '+inf' : dayNumber(query.to)
        const rowKeys = await redis.zrangebyscore(index, min, max)
        // One (key, model, day) may have a row in `{tg}` and one with its owner (or one per
        // owner, if the key changed hands that day): they add up; owner and tier are the latest's.
        const rows = new Map<string, { row: UsageRecord; at: number }>()
        for (const group of chunks(rowKeys, BATCH)) {
          for (const found of await readRows(group)) {
            const id = `${found.row.keyId}\u0000${found.row.model}\u0000${found.row.day}`
            const prev = rows.get(id)
            rows.set(id, prev === undefined ? found : mergeRows(prev, found))
          }
        }
        return [...rows.values()].map((r) => r.row).sort(compareUsageRows)
      })
    },
  }

  /** Rows by their keys: one pipeline, or on a cluster one per slot (a pipeline stays on one). */
  async function readRows(rowKeys: readonly string[]): Promise<Array<{ row: UsageRecord; at: number }>> {
    const bySlot = new Map<string, string[]>()
    for (const key of rowKeys) {
      const tag = isCluster(redis) ? (/\{[^}]*\}/.exec(key)?.[0] ?? '') : ''
      bySlot.set(tag, [...(bySlot.get(tag) ?? []), key])
    }
    const read = await Promise.all(
      [...bySlot.values()].map(async (keys) => {
        const pipeline = redis.pipeline()
        for (const key of keys) pipeline.hgetall(key)
        return replies(pipeline)
      }),
    )
    return read.flat().flatMap((fields) => {
      const row = usageRow(fields)
      return row === null ? [] : [{ row, at: Number((fields as Record<string, unknown>).at ?? 0) }]
    })
  }

  const streams: StreamJournal = {
    open: async (entry) => {
      checkStreamCharge(entry)
      return io(async () => {
        const outcome = await run(OPEN_STREAM, [k.stream(entry.id), k.streams], streamEntryValues(entry))
        if (outcome !== 'ok') throw unexpected('OPEN_STREAM', outcome)
      })
    },

    checkpoint: async (id, charge, at) => {
      checkStreamCharge(charge)
      return io(async () => {
        const outcome = await run(
          CHECKPOINT_STREAM,
          [k.stream(id)],
          [at, charge.inputTokens, charge.outputTokens, charge.costNanos],
        )
        if (outcome !== 'ok') throw unexpected('CHECKPOINT_STREAM', outcome)
      })
    },

    list: () =>
      io(async () => {
        const ids = Object.keys(await redis.hgetall(k.streams))
        const entries: StreamEntry[] = []
        for (const group of chunks(ids, BATCH)) {
          const pipeline = redis.pipeline()
          for (const id of group) pipeline.hgetall(k.stream(id))
          for (const [i, fields] of (await replies(pipeline)).entries()) {
            const entry = streamEntry(group[i] ?? '', fields)
            if (entry !== null) entries.push(entry)
          }
        }
        return entries.sort((a, b) => a.at - b.at)
      }),

    recover: (id) =>
      io(async () => {
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const entry = streamEntry(id, await redis.hgetall(k.stream(id)))
          if (entry === null) return null
          const day = dayOf(entry.at)
          const outcome = await run(
            RECOVER_STREAM,
            [
              k.stream(id),
              k.streams,
              k.usageRows,
              k.usageRow(entry.keyId, entry.model, day),
              k.usageRowsOfKey(entry.keyId),
            ],
            [id, entry.keyId, entry.model, day, dayNumber(day), RECOVERED_STREAM_TTL_MS],
          )
          if (outcome === 'gone') return null
          if (outcome === 'changed') continue
          if (!Array.isArray(outcome) || outcome.length !== 3) throw unexpected('RECOVER_STREAM', outcome)
          const [inputTokens, outputTokens, costNanos] = outcome.map(Number) as [number, number, number]
          return {
            keyId: entry.keyId,
            owner: entry.owner,
            tier: entry.tier,
            model: entry.model,
            day,
            requests: 1,
            inputTokens,
            outputTokens,
            costNanos,
          }
        }
        throw new StoreConflictError(
          `stream ${id} kept changing during recovery; gave up after ${CAS_ATTEMPTS} attempts`,
        )
      }),
  }

  return {
    kind: 'redis',
    keys,
    ownership,
    usage,
    streams,
    ...redisAuthStores(redis, k.base),
    ping: () => pingRedis(redis, `${k.base}ping`),
    close: () => closeRedis(redis),
  }
}

/** A journal entry as stored; null when it is gone, or recovered already (it lingers for a while). */
function streamEntry(id: string, fields: unknown): StreamEntry | null {
  if (typeof fields !== 'object' || fields === null) return null
  const f = fields as Record<string, unknown>
  const { instance, keyId, owner, tier, model } = f
  if (
    f.recovered !== undefined ||
    typeof instance !== 'string' ||
    typeof keyId !== 'string' ||
    typeof owner !== 'string' ||
    typeof tier !== 'string' ||
    typeof model !== 'string'
  )
    return null
  return {
    id,
    instance,
    keyId,
    owner,
    tier,
    model,
    at: Number(f.at ?? 0),
    inputTokens: Number(f.inputTokens ?? 0),
    outputTokens: Number(f.outputTokens ?? 0),
    costNanos: Number(f.costNanos ?? 0),
  }
}

/** Two rows of one (key, model, day) in different places: the sums, owner and tier of the latest. */
function mergeRows(
  a: { row: UsageRecord; at: number },
  b: { row: UsageRecord; at: number },
): { row: UsageRecord; at: number } {
  const [older, newer] = a.at <= b.at ? [a, b] : [b, a]
  return {
    at: newer.at,
    row: {
      ...newer.row,
      requests: older.row.requests + newer.row.requests,
      inputTokens: older.row.inputTokens + newer.row.inputTokens,
      outputTokens: older.row.outputTokens + newer.row.outputTokens,
      costNanos: older.row.costNanos + newer.row.costNanos,
    },
  }
}

function usageRow(fields: unknown): UsageRecord | null {
  if (typeof fields !== 'object' || fields === null) return null
  const f = fields as Record<string, unknown>
  const { keyId, owner, tier, model, day } = f
  if (
    typeof keyId !== 'string' ||
    typeof owner !== 'string' ||
    typeof tier !== 'string' ||
    typeof model !== 'string' ||
    typeof day !== 'string'
  )
    return null
  return {
    keyId,
    owner,
    tier,
    model,
    day,
    requests: Number(f.requests ?? 0),
    inputTokens: Number(f.inputTokens ?? 0),
    outputTokens: Number(f.outputTokens ?? 0),
    // Rows written before costs were kept in nano-units hold a float `cost` as well.
    costNanos: Number(f.costNanos ?? 0) + Math.round(Number(f.cost ?? 0) * NANOS_PER_UNIT),
  }
}
