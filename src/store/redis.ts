// The stores on Redis, shared by any number of gateway instances.
//
// Keys are `<prefix>{tg}:…`, the one hash tag of global state, so the Lua scripts and MULTI
// blocks below are legal on a cluster; but usage rows written on every call's settle, and
// the journal of running streams, live with their owner (`<prefix>{o:<owner>}:…`,
// store/redis-kit.ts), so the fleet's settles spread over a cluster's masters (see "Usage
// rows" and "The stream journal" below). Each script declares every key
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
import { ROW_COUNTERS } from './ports.ts'
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
  rowCounters,
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

// A row's prompt-cache and batch counters (ports.ts ROW_COUNTERS), after its labels in a
// write's ARGV. Only those that are not 0 are written: most calls have none, and their rows
// stay as they were (a field that is absent reads as 0).
function cacheIncrements(row: string, argv: string, before: number | string): string {
  return ROW_COUNTERS.map(
    (field, i) =>
      `if ${argv}[${before} + ${i + 1}] ~= '0' then redis.call('HINCRBY', ${row}, '${field}', ${argv}[${before} + ${i + 1}]) end`,
  ).join('\n')
}

// The settle of a journalled stream, on its owner's slot: its row, its entry and the slot's
// journal index change in one script, so the stream is charged by its settle or by a
// recovery, never both.
// KEYS: the row, the stream's entry, the slot's journal index, the write's marker (when it has an id).
// ARGV: how long a marker is kept (ms), requests, inputTokens, outputTokens, costNanos, keyId,
// model, day, owner, tier, the cache counters (ROW_COUNTERS), the stream it settles, the
// write's id ('' for none). A stream that recovery charged already has its cache counters
// left out: recovery charged its prompt as plain input (usage-rows.ts, lessRecovered).
// Counts go in as the strings they arrive as, so HINCRBY sees integers, never Lua doubles;
// only a settle of a stream recovery charged already (rare) does arithmetic. A write whose
// id has a marker was applied before (its reply was lost): it is skipped, whole.
// Returns 1 when the row exists but is not yet in the indexes, else 0 (as ADD_OWNED_USAGE).
const SETTLE_STREAM = script(`
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local row = KEYS[1]
if ARGV[${12 + ROW_COUNTERS.length}] == '' or redis.call('SET', KEYS[4], '1', 'NX', 'PX', ARGV[1]) then
  local requests, input, output, cost = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
  local got = redis.call('HMGET', KEYS[2], 'recovered', 'inputTokens', 'outputTokens', 'costNanos')
  if got[1] then
    local less = function(n, m) return string.format('%d', math.max(0, tonumber(n) - tonumber(m or '0'))) end
    requests, input, output, cost = less(requests, '1'), less(input, got[2]), less(output, got[3]), less(cost, got[4])
  else
    ${cacheIncrements('row', 'ARGV', 10)}
  end
  redis.call('DEL', KEYS[2])
  redis.call('HDEL', KEYS[3], ARGV[${11 + ROW_COUNTERS.length}])
  redis.call('HINCRBY', row, 'requests', requests)
  redis.call('HINCRBY', row, 'inputTokens', input)
  redis.call('HINCRBY', row, 'outputTokens', output)
  redis.call('HINCRBY', row, 'costNanos', cost)
  redis.call('HSET', row, 'keyId', ARGV[6], 'model', ARGV[7], 'day', ARGV[8], 'owner', ARGV[9], 'tier', ARGV[10], 'at', at)
end
if redis.call('EXISTS', row) == 1 and redis.call('HEXISTS', row, 'ix') == 0 then return 1 end
return 0
`)

// Usage rows: a row per (key, model, day) is a hash on its owner's slot, written with the
// write's marker by ADD_OWNED_USAGE: one script per settle, on the owner's master. The
// indexes that find rows (every row's, and each key's) stay in `{tg}`, where a query by key
// needs no owner; a row goes into them only when the script says it is not there yet (its
// `ix` field unset): once per row, so per key, model and day, never per call. Until then a
// row is written but not found; a failure in between is retried by the meter under the
// write's id, which indexes it then.
// A call that settles a journalled stream writes the same row with SETTLE_STREAM (its journal
// entry is on the same slot). Rows written before rows moved (issue #25), and those of streams
// settled or recovered in the old `{tg}` journal, stay in `{tg}`: a query reads both layouts
// through the same indexes and sums the rows of one (key, model, day). Nothing to migrate.
//
// KEYS: per row: the row, then the write's marker (when it has an id).
// ARGV: how long a marker is kept (ms), then per row: requests, inputTokens, outputTokens,
// costNanos, keyId, model, day, owner, tier, the cache counters (ROW_COUNTERS), the write's
// id ('' for none).
// Returns per row 1 when the row exists but is not yet in the indexes, else 0.
const ADD_OWNED_USAGE = script(`
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local out = {}
local k = 1
for i = 0, (#ARGV - 1) / ${10 + ROW_COUNTERS.length} - 1 do
  local a = 1 + ${10 + ROW_COUNTERS.length} * i
  local row = KEYS[k]
  k = k + 1
  local marker
  if ARGV[a + ${10 + ROW_COUNTERS.length}] ~= '' then
    marker = KEYS[k]
    k = k + 1
  end
  if not marker or redis.call('SET', marker, '1', 'NX', 'PX', ARGV[1]) then
    redis.call('HINCRBY', row, 'requests', ARGV[a + 1])
    redis.call('HINCRBY', row, 'inputTokens', ARGV[a + 2])
    redis.call('HINCRBY', row, 'outputTokens', ARGV[a + 3])
    redis.call('HINCRBY', row, 'costNanos', ARGV[a + 4])
    ${cacheIncrements('row', 'ARGV', 'a + 9')}
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

/** How long the markers of one write's rows are kept: the longest a row asks for (a once charge: UsageWrite.keepIdMs). */
function idMemoryMs(records: readonly UsageWrite[]): number {
  return Math.round(Math.max(USAGE_WRITE_MEMORY_MS, ...records.map((r) => r.keepIdMs ?? 0)))
}

// The stream journal (ports.ts StreamJournal). A stream's entry lives on its owner's slot
// (`<prefix>{o:<owner>}:stream:<id>`), with the slot's index of the streams journalled there
// (`…:streams`, id → instance): the open, each checkpoint and the settle are one script
// each on that slot, so streaming calls spread over a cluster's masters like the rest of
// their owner's state, and touch `{tg}` only as any call does (a new usage row's index, once
// per key, model and day).
// Recovery must find the entries of a gateway that stopped without reading every slot. So a
// gateway says, in `{tg}`, on which slots it journals: `streams:gateways` (the gateways that
// do) and `streams:slots:<instance>` (the namespaces, scored by when it said so). It says so
// before its first open on a slot and again once JOURNAL_REGISTRATION_MS has passed (not per
// call); a recovery reads the slots of stopped gateways only, and drops a namespace said
// longer than JOURNAL_REGISTRY_STALE_MS ago once its slot holds none of the gateway's
// entries (UNREGISTER_SLOT: only if it was not said again meanwhile). Both times are the
// gateways' own clocks, NTP-close: a skew under the difference of the two (two minutes) is
// harmless.
// Entries journalled in `{tg}` by a Tollgate before #25 (`{tg}:stream:<id>`, indexed in
// `{tg}:streams`) are still listed and recovered there, with RECOVER_STREAM; nothing opens
// one any more, so they are gone once those gateways' streams settled or were recovered.

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

// The old layout's recovery, all in `{tg}`.
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

// A recovery on the owner's slot: the entry, the slot's journal index and the owner's row.
// KEYS: the entry, the slot's journal index, the row
// ARGV: id, keyId, model, day, day number, ms a recovered entry is kept
// Returns 'gone', 'changed' (as RECOVER_STREAM), or the charge and 1 when the row is not yet
// in the indexes (as ADD_OWNED_USAGE), else 0.
const RECOVER_OWNED_STREAM = script(`
local e = redis.call('HMGET', KEYS[1], 'recovered', 'keyId', 'model', 'at', 'inputTokens', 'outputTokens', 'costNanos', 'owner', 'tier')
if e[1] or not e[2] then return 'gone' end
if e[2] ~= ARGV[2] or e[3] ~= ARGV[3] or math.floor(tonumber(e[4]) / 86400000) ~= tonumber(ARGV[5]) then return 'changed' end
local t = redis.call('TIME')
local at = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HINCRBY', KEYS[3], 'requests', 1)
redis.call('HINCRBY', KEYS[3], 'inputTokens', e[5])
redis.call('HINCRBY', KEYS[3], 'outputTokens', e[6])
redis.call('HINCRBY', KEYS[3], 'costNanos', e[7])
redis.call('HSET', KEYS[3], 'keyId', ARGV[2], 'model', ARGV[3], 'day', ARGV[4], 'owner', e[8], 'tier', e[9], 'at', at)
redis.call('HSET', KEYS[1], 'recovered', '1')
redis.call('PEXPIRE', KEYS[1], ARGV[6])
redis.call('HDEL', KEYS[2], ARGV[1])
local fresh = 0
if redis.call('HEXISTS', KEYS[3], 'ix') == 0 then fresh = 1 end
return { e[5], e[6], e[7], fresh }
`)

/** How often a gateway says again that it journals on a slot it journalled on before. */
export const JOURNAL_REGISTRATION_MS = 60_000
/** A slot a gateway said this long ago, with none of its entries left, is dropped from its list. */
export const JOURNAL_REGISTRY_STALE_MS = 3 * JOURNAL_REGISTRATION_MS

// KEYS: a gateway's slots, the gateways that journal  ARGV: namespace, cutoff (ms), instance
// The namespace goes only if nobody said it again since the cutoff; the gateway goes with
// its last namespace. In `{tg}`, like the registration (one MULTI), so neither splits the other.
const UNREGISTER_SLOT = script(`
local said = redis.call('ZSCORE', KEYS[1], ARGV[1])
if said and tonumber(said) < tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[3]) end
return 'ok'
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
    /** The stream journal on the slot of namespace `ns`: an entry, and the index (id → instance). */
    journalIn: (ns: string) => ({ entry: (id: string) => `${ns}stream:${enc(id)}`, index: `${ns}streams` }),
    /** The gateways that journal on owners' slots. */
    journalGateways: `${base}streams:gateways`,
    /** The namespaces a gateway journals in, scored by when it said so (epoch ms). */
    journalSlots: (instance: string) => `${base}streams:slots:${enc(instance)}`,
    /** A stream journalled in `{tg}` by a Tollgate before #25. */
    stream: (id: string) => `${base}stream:${enc(id)}`,
    /** The old layout's journalled streams neither settled nor recovered: id → instance. */
    streams: `${base}streams`,
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
  return [
    r.requests,
    r.inputTokens,
    r.outputTokens,
    r.costNanos,
    r.keyId,
    r.model,
    r.day,
    r.owner,
    r.tier,
    ...ROW_COUNTERS.map((field) => r[field] ?? 0),
  ]
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

  /** A settled stream's write: one SETTLE_STREAM on its owner's slot, with its journal entry. */
  async function settleStream(r: UsageWrite & { stream: string }): Promise<void> {
    const identity = { keyId: r.keyId, owner: r.owner }
    const row = k.ownerUsageRow(identity, r.model, r.day)
    const journal = k.journalIn(identityNamespace(prefix, identity))
    const keys = [row, journal.entry(r.stream), journal.index]
    if (r.id !== undefined) keys.push(k.ownerUsageWrite(identity, r.id))
    await withRedis(settlements, async () => {
      const fresh = await runScript(settlements, SETTLE_STREAM, keys, [
        idMemoryMs([r]),
        ...rowArgs(r),
        r.stream,
        r.id ?? '',
      ])
      if (fresh !== 0 && fresh !== 1) throw unexpected('SETTLE_STREAM', fresh)
      if (fresh === 1) await indexRows([{ r, row }])
    })
  }

  /** Writes of one owner: one ADD_OWNED_USAGE on its slot; a new row is then indexed in `{tg}`. */
  async function addOwned(records: readonly UsageWrite[]): Promise<void> {
    const keys: string[] = []
    const args: Array<string | number> = [idMemoryMs(records)]
    const rows = records.map((r) => k.ownerUsageRow({ keyId: r.keyId, owner: r.owner }, r.model, r.day))
    for (const [i, r] of records.entries()) {
      keys.push(rows[i] ?? '')
      if (r.id !== undefined) keys.push(k.ownerUsageWrite({ keyId: r.keyId, owner: r.owner }, r.id))
      args.push(...rowArgs(r), r.id ?? '')
    }
    await withRedis(settlements, async () => {
      const reply = await runScript(settlements, ADD_OWNED_USAGE, keys, args)
      if (!Array.isArray(reply) || reply.length !== records.length) throw unexpected('ADD_OWNED_USAGE', reply)
      await indexRows(records.flatMap((r, i) => (reply[i] === 1 ? [{ r, row: rows[i] ?? '' }] : [])))
    })
  }

  /** Puts rows on owners' slots that a script found unindexed into `{tg}`'s indexes, and marks them. */
  async function indexRows(
    fresh: ReadonlyArray<{ r: Pick<UsageRecord, 'keyId' | 'day'>; row: string }>,
  ): Promise<void> {
    if (fresh.length === 0) return
    const index = redis.multi()
    for (const { r, row } of fresh) {
      index.zadd(k.usageRows, dayNumber(r.day), row)
      index.zadd(k.usageRowsOfKey(r.keyId), dayNumber(r.day), row)
    }
    await replies(index)
    await Promise.all(fresh.map(({ row }) => redis.hset(row, 'ix', '1')))
  }

  const usage: UsageStore = {
    add: async (records) => {
      checkUsageRecords(records)
      if (records.length === 0) return
      const groups = new Map<string, UsageWrite[]>()
      const settles: Array<UsageWrite & { stream: string }> = []
      for (const r of records) {
        if (r.stream !== undefined) {
          settles.push({ ...r, stream: r.stream })
          continue
        }
        // A once charge's marker lives far longer than a retry's: in a script of its own, so
        // the other rows' markers keep their short life (idMemoryMs takes a write's longest).
        const slot = `${identityNamespace(prefix, { keyId: r.keyId, owner: r.owner })}${r.keepIdMs === undefined ? '' : '\u0000once'}`
        groups.set(slot, [...(groups.get(slot) ?? []), r])
      }
      // One write per slot (the meter sends one row; a retry may carry several owners'), and
      // one per stream settled (its journal entry goes in the same script).
      const outcomes = await Promise.allSettled([...[...groups.values()].map(addOwned), ...settles.map(settleStream)])
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

  /** When this store last said that a gateway journals on a slot: `<instance> <namespace>` → epoch ms. */
  const registered = new Map<string, number>()

  /** Says (in `{tg}`) that `instance` journals in `ns`, unless it said so lately. */
  async function register(instance: string, ns: string): Promise<void> {
    const said = `${instance} ${ns}`
    const now = Date.now()
    if (now - (registered.get(said) ?? -Infinity) < JOURNAL_REGISTRATION_MS) return
    await replies(redis.multi().sadd(k.journalGateways, instance).zadd(k.journalSlots(instance), now, ns))
    // What this store said long ago it would say again anyway: forgotten, so the map stays small.
    if (registered.size >= 10_000)
      for (const [key, at] of registered) if (now - at >= JOURNAL_REGISTRATION_MS) registered.delete(key)
    registered.set(said, now)
  }

  /** The entries `instance` journalled in `ns`; drops `ns` from its list when none are left and it is stale. */
  async function journalledIn(instance: string, ns: string, said: number, read: boolean): Promise<StreamEntry[]> {
    const journal = k.journalIn(ns)
    const index = await redis.hgetall(journal.index)
    const ids = Object.keys(index).filter((id) => index[id] === instance)
    const cutoff = Date.now() - JOURNAL_REGISTRY_STALE_MS
    if (ids.length === 0 && said < cutoff) {
      const outcome = await run(UNREGISTER_SLOT, [k.journalSlots(instance), k.journalGateways], [ns, cutoff, instance])
      if (outcome !== 'ok') throw unexpected('UNREGISTER_SLOT', outcome)
    }
    if (!read || ids.length === 0) return []
    // One slot: one pipeline.
    const pipeline = redis.pipeline()
    for (const id of ids) pipeline.hgetall(journal.entry(id))
    return (await replies(pipeline)).flatMap((fields, i) => streamEntry(ids[i] ?? '', fields) ?? [])
  }

  /** The entries of the old layout in `{tg}`, of the instances `of` accepts. */
  async function journalledInTg(of: (instance: string) => Promise<boolean>): Promise<StreamEntry[]> {
    const index = await redis.hgetall(k.streams)
    const ids: string[] = []
    for (const [id, instance] of Object.entries(index)) if (await of(instance)) ids.push(id)
    const entries: StreamEntry[] = []
    for (const group of chunks(ids, BATCH)) {
      const pipeline = redis.pipeline()
      for (const id of group) pipeline.hgetall(k.stream(id))
      for (const [i, fields] of (await replies(pipeline)).entries()) {
        const entry = streamEntry(group[i] ?? '', fields)
        if (entry !== null) entries.push(entry)
      }
    }
    return entries
  }

  /** Recovers a stream of the old layout in `{tg}`. */
  async function recoverInTg(id: string): Promise<UsageRecord | null> {
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
      return recoveredRecord(entry, day, outcome)
    }
    throw new StoreConflictError(`stream ${id} kept changing during recovery; gave up after ${CAS_ATTEMPTS} attempts`)
  }

  const streams: StreamJournal = {
    open: async (entry) => {
      checkStreamCharge(entry)
      const ns = identityNamespace(prefix, entry)
      const journal = k.journalIn(ns)
      return io(async () => {
        // Said before the entry is written: a recovery that finds the gateway stopped finds the entry.
        await register(entry.instance, ns)
        const outcome = await run(OPEN_STREAM, [journal.entry(entry.id), journal.index], streamEntryValues(entry))
        if (outcome !== 'ok') throw unexpected('OPEN_STREAM', outcome)
      })
    },

    checkpoint: async (stream, charge, at) => {
      checkStreamCharge(charge)
      return io(async () => {
        const outcome = await run(
          CHECKPOINT_STREAM,
          [k.journalIn(identityNamespace(prefix, stream)).entry(stream.id)],
          [at, charge.inputTokens, charge.outputTokens, charge.costNanos],
        )
        if (outcome !== 'ok') throw unexpected('CHECKPOINT_STREAM', outcome)
      })
    },

    list: (of) =>
      io(async () => {
        const verdicts = new Map<string, Promise<boolean>>()
        const wanted = (instance: string): Promise<boolean> => {
          if (of === undefined) return Promise.resolve(true)
          let verdict = verdicts.get(instance)
          if (verdict === undefined) {
            verdict = of(instance)
            verdicts.set(instance, verdict)
          }
          return verdict
        }
        const entries = await journalledInTg(wanted)
        for (const instance of await redis.smembers(k.journalGateways)) {
          const read = await wanted(instance)
          // A running gateway's slots are looked at only once stale, to drop those it left.
          const cutoff = Date.now() - JOURNAL_REGISTRY_STALE_MS
          const slots = await redis.zrangebyscore(
            k.journalSlots(instance),
            '-inf',
            read ? '+inf' : cutoff,
            'WITHSCORES',
          )
          const said = pairs(slots)
          for (const group of chunks(said, BATCH / 10)) {
            const found = await Promise.all(group.map(([ns, at]) => journalledIn(instance, ns, Number(at), read)))
            entries.push(...found.flat())
          }
        }
        return entries.sort((a, b) => a.at - b.at)
      }),

    recover: (stream) =>
      io(async () => {
        const journal = k.journalIn(identityNamespace(prefix, stream))
        for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt++) {
          const fields = await redis.hgetall(journal.entry(stream.id))
          // Not on its owner's slot: journalled in `{tg}` by a Tollgate before #25, if anywhere.
          if (Object.keys(fields).length === 0) return recoverInTg(stream.id)
          const entry = streamEntry(stream.id, fields)
          if (entry === null) return null
          const day = dayOf(entry.at)
          const row = k.ownerUsageRow(entry, entry.model, day)
          const outcome = await run(
            RECOVER_OWNED_STREAM,
            [journal.entry(stream.id), journal.index, row],
            [stream.id, entry.keyId, entry.model, day, dayNumber(day), RECOVERED_STREAM_TTL_MS],
          )
          if (outcome === 'gone') return null
          if (outcome === 'changed') continue
          if (!Array.isArray(outcome) || outcome.length !== 4) throw unexpected('RECOVER_OWNED_STREAM', outcome)
          if (outcome[3] === 1) await indexRows([{ r: { keyId: entry.keyId, day }, row }])
          return recoveredRecord(entry, day, outcome.slice(0, 3))
        }
        throw new StoreConflictError(
          `stream ${stream.id} kept changing during recovery; gave up after ${CAS_ATTEMPTS} attempts`,
        )
      }),
  }

  return {
    kind: 'redis',
    keys,
    ownership,
    usage,
    streams,
    ...redisAuthStores(redis, prefix),
    ping: () => pingRedis(redis, `${k.base}ping`),
    close: () => closeRedis(redis),
  }
}

/** The record a recovery charged: one request of the entry's charge, on the day of its last write. */
function recoveredRecord(entry: StreamEntry, day: string, charge: readonly unknown[]): UsageRecord {
  const [inputTokens, outputTokens, costNanos] = charge.map(Number) as [number, number, number]
  const { keyId, owner, tier, model } = entry
  // A journal entry knows no cache parts: its prompt is charged as plain input.
  return {
    keyId,
    owner,
    tier,
    model,
    day,
    requests: 1,
    inputTokens,
    outputTokens,
    costNanos,
    ...rowCounters(() => 0),
  }
}

/** [member, score, member, score…] as pairs. */
function pairs(flat: readonly string[]): Array<[string, string]> {
  const out: Array<[string, string]> = []
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i] ?? '', flat[i + 1] ?? ''])
  return out
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
      ...rowCounters((c) => (older.row[c] ?? 0) + (newer.row[c] ?? 0)),
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
    ...rowCounters((c) => Number(f[c] ?? 0)),
  }
}
