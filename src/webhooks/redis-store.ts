// The webhook store on Redis, shared by every instance. Keys live under `<prefix>{tg}:wh:`:
//
//   ep:<id>        an endpoint (JSON, its secret included)
//   eps            sorted set of endpoint ids, oldest first
//   ev:<id>        an event (JSON: the event, its dedupe key, when it was stored)
//   dd:<key>       dedupe key → the event id
//   evs            sorted set of event ids by when they were stored (pruning)
//   evd:<event>    set of the event's delivery ids (an event is pruned once it has none)
//   dl:<id>        a delivery (hash)
//   at:<id>        its attempts (list of JSON)
//   epd:<endpoint> sorted set of an endpoint's delivery ids by a shared sequence (history)
//   due            sorted set of pending delivery ids by their next attempt (epoch ms)
//   fin            sorted set of finished delivery ids by when they finished (pruning)
//   seq            the sequence
//
// An event and its deliveries are one Lua script; so is an attempt with the delivery's new
// state. Scripts that clean up (delete, prune) reach keys they compute: every key shares the
// {tg} hash tag, so on a cluster they are on the script's slot.
import type { EventType, GatewayEvent } from '../events/types.ts'
import { closeRedis, pingRedis, type RedisConnection } from '../store/redis-client.ts'
import { redisNamespace, runScript, script, unexpected, withRedis, type ScriptArg } from '../store/redis-kit.ts'
import type { Attempt, Delivery, DeliveryStatus, WebhookEndpoint, WebhookStore } from './port.ts'

const APPEND = script(`
if ARGV[1] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('SET', KEYS[1], ARGV[2])
end
local now = ARGV[4]
redis.call('SET', KEYS[2], ARGV[3])
redis.call('ZADD', KEYS[3], now, ARGV[2])
local n = (#ARGV - 5) / 2
for i = 1, n do
  local id = ARGV[4 + i * 2]
  local endpoint = ARGV[5 + i * 2]
  local seq = redis.call('INCR', KEYS[5])
  redis.call('HSET', KEYS[5 + i * 2], 'endpointId', endpoint, 'eventId', ARGV[2], 'eventType', ARGV[5],
    'status', 'pending', 'attempts', 0, 'next', now, 'created', now, 'updated', now, 'seq', seq)
  redis.call('ZADD', KEYS[6 + i * 2], seq, id)
  redis.call('ZADD', KEYS[4], now, id)
  redis.call('SADD', KEYS[6], id)
end
return 1
`)

// KEYS: ev, ep, dl, epd, due, seq, evd. ARGV: id, endpointId, eventId, now, replayOf.
const ADD_DELIVERY = script(`
local ev = redis.call('GET', KEYS[1])
if not ev or redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local type = cjson.decode(ev).event.type
local seq = redis.call('INCR', KEYS[6])
local now = ARGV[4]
redis.call('HSET', KEYS[3], 'endpointId', ARGV[2], 'eventId', ARGV[3], 'eventType', type,
  'status', 'pending', 'attempts', 0, 'next', now, 'created', now, 'updated', now, 'seq', seq)
if ARGV[5] ~= '' then redis.call('HSET', KEYS[3], 'replayOf', ARGV[5]) end
redis.call('ZADD', KEYS[4], seq, ARGV[1])
redis.call('ZADD', KEYS[5], now, ARGV[1])
redis.call('SADD', KEYS[7], ARGV[1])
return 1
`)

// KEYS: dl, at, due, fin. ARGV: id, attempt JSON, new status, next ('' none), at, http status ('' none), error ('' none).
const RECORD_ATTEMPT = script(`
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'updated', ARGV[5])
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'lastStatus', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'lastError', ARGV[7]) else redis.call('HDEL', KEYS[1], 'lastError') end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'next', ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
else
  redis.call('HDEL', KEYS[1], 'next')
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1])
end
return 1
`)

// Removes one delivery and everything that names it. ns is the wh: namespace.
const DROP_DELIVERY = `
local function drop(ns, id)
  local dl = ns .. 'dl:' .. id
  local fields = redis.call('HMGET', dl, 'endpointId', 'eventId')
  if fields[1] then redis.call('ZREM', ns .. 'epd:' .. fields[1], id) end
  if fields[2] then redis.call('SREM', ns .. 'evd:' .. fields[2], id) end
  redis.call('DEL', dl, ns .. 'at:' .. id)
  redis.call('ZREM', ns .. 'due', id)
  redis.call('ZREM', ns .. 'fin', id)
end
`

// KEYS: ep, eps, epd. ARGV: ns, id.
const DELETE_ENDPOINT = script(`${DROP_DELIVERY}
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('ZREM', KEYS[2], ARGV[2])
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do drop(ARGV[1], id) end
redis.call('DEL', KEYS[3])
return 1
`)

// KEYS: fin, evs. ARGV: ns, before, batch.
const PRUNE = script(`${DROP_DELIVERY}
local n = 0
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])) do
  drop(ARGV[1], id)
  n = n + 1
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2], 'LIMIT', 0, ARGV[3])) do
  if redis.call('SCARD', ARGV[1] .. 'evd:' .. id) == 0 then
    local ev = redis.call('GET', ARGV[1] .. 'ev:' .. id)
    if ev then
      local key = cjson.decode(ev).dedupeKey
      if type(key) == 'string' then redis.call('DEL', ARGV[1] .. 'dd:' .. key) end
    end
    redis.call('DEL', ARGV[1] .. 'ev:' .. id)
    redis.call('ZREM', KEYS[2], id)
    n = n + 1
  end
end
return n
`)

const PRUNE_BATCH = 1000

function deliveryOf(id: string, h: Record<string, string>): Delivery | null {
  if (h.status === undefined) return null
  const num = (v: string | undefined): number | null => (v === undefined ? null : Number(v))
  return {
    id,
    endpointId: h.endpointId ?? '',
    eventId: h.eventId ?? '',
    eventType: (h.eventType ?? '') as EventType,
    status: h.status as DeliveryStatus,
    attempts: Number(h.attempts ?? 0),
    nextAttemptAt: h.status === 'pending' ? num(h.next) : null,
    createdAt: Number(h.created ?? 0),
    updatedAt: Number(h.updated ?? 0),
    lastStatus: num(h.lastStatus),
    lastError: h.lastError ?? null,
    replayOf: h.replayOf ?? null,
  }
}

export function createRedisWebhookStore(redis: RedisConnection, keyPrefix: string): WebhookStore {
  const ns = `${redisNamespace(keyPrefix)}wh:`
  const k = {
    ep: (id: string) => `${ns}ep:${id}`,
    eps: `${ns}eps`,
    ev: (id: string) => `${ns}ev:${id}`,
    dd: (key: string) => `${ns}dd:${key}`,
    evs: `${ns}evs`,
    evd: (id: string) => `${ns}evd:${id}`,
    dl: (id: string) => `${ns}dl:${id}`,
    at: (id: string) => `${ns}at:${id}`,
    epd: (id: string) => `${ns}epd:${id}`,
    due: `${ns}due`,
    fin: `${ns}fin`,
    seq: `${ns}seq`,
  }
  const run = (s: ReturnType<typeof script>, keys: string[], args: ScriptArg[]): Promise<unknown> =>
    withRedis(redis, () => runScript(redis, s, keys, args))
  const getDelivery = async (id: string): Promise<Delivery | null> =>
    deliveryOf(id, await withRedis(redis, () => redis.hgetall(k.dl(id))))
  const getEndpoint = async (id: string): Promise<WebhookEndpoint | null> => {
    const json = await withRedis(redis, () => redis.get(k.ep(id)))
    return json === null ? null : (JSON.parse(json) as WebhookEndpoint)
  }

  return {
    kind: 'redis',

    async createEndpoint(e) {
      await withRedis(redis, async () => {
        const seq = await redis.incr(k.seq)
        await redis.multi().set(k.ep(e.id), JSON.stringify(e)).zadd(k.eps, seq, e.id).exec()
      })
    },
    async listEndpoints() {
      return withRedis(redis, async () => {
        const ids = await redis.zrange(k.eps, '0', '-1')
        if (ids.length === 0) return []
        const values = await redis.mget(...ids.map((id) => k.ep(id)))
        return values.flatMap((v) => (v === null ? [] : [JSON.parse(v) as WebhookEndpoint]))
      })
    },
    getEndpoint,
    async updateEndpoint(e) {
      const reply = await withRedis(redis, () => redis.set(k.ep(e.id), JSON.stringify(e), 'XX'))
      return reply === 'OK'
    },
    async deleteEndpoint(id) {
      return (await run(DELETE_ENDPOINT, [k.ep(id), k.eps, k.epd(id)], [ns, id])) === 1
    },

    async append(event, deliveries, dedupeKey, now) {
      const keys = [
        dedupeKey === null ? k.dd('-') : k.dd(dedupeKey),
        k.ev(event.id),
        k.evs,
        k.due,
        k.seq,
        k.evd(event.id),
        ...deliveries.flatMap((d) => [k.dl(d.id), k.epd(d.endpointId)]),
      ]
      const args: ScriptArg[] = [
        dedupeKey === null ? '0' : '1',
        event.id,
        JSON.stringify({ event, dedupeKey, createdAt: now }),
        now,
        event.type,
        ...deliveries.flatMap((d) => [d.id, d.endpointId]),
      ]
      const reply = await run(APPEND, keys, args)
      if (reply !== 0 && reply !== 1) throw unexpected('the webhook append script', reply)
      return reply === 1
    },
    async getEvent(id) {
      const json = await withRedis(redis, () => redis.get(k.ev(id)))
      return json === null ? null : (JSON.parse(json) as { event: GatewayEvent }).event
    },
    getDelivery,
    async addDelivery(eventId, d, now) {
      const reply = await run(
        ADD_DELIVERY,
        [k.ev(eventId), k.ep(d.endpointId), k.dl(d.id), k.epd(d.endpointId), k.due, k.seq, k.evd(eventId)],
        [d.id, d.endpointId, eventId, now, d.replayOf ?? ''],
      )
      return reply === 1 ? await getDelivery(d.id) : null
    },
    async recordAttempt(id, attempt, outcome) {
      const status: DeliveryStatus = outcome.kind === 'retry' ? 'pending' : outcome.kind
      const reply = await run(
        RECORD_ATTEMPT,
        [k.dl(id), k.at(id), k.due, k.fin],
        [
          id,
          JSON.stringify(attempt),
          status,
          outcome.kind === 'retry' ? outcome.at : '',
          attempt.at,
          attempt.status ?? '',
          attempt.error ?? '',
        ],
      )
      return reply === 1
    },
    async attempts(id) {
      const list = await withRedis(redis, () => redis.lrange(k.at(id), 0, -1))
      return list.map((json) => JSON.parse(json) as Attempt)
    },
    async listDeliveries(endpointId, page) {
      return withRedis(redis, async () => {
        let max = '+inf'
        if (page.after !== undefined) {
          const score = await redis.zscore(k.epd(endpointId), page.after)
          if (score === null) return { data: [], hasMore: false }
          max = `(${score}`
        }
        const ids = await redis.zrevrangebyscore(k.epd(endpointId), max, '-inf', 'LIMIT', 0, page.limit + 1)
        const shown = ids.slice(0, page.limit)
        const pipeline = redis.pipeline()
        for (const id of shown) pipeline.hgetall(k.dl(id))
        const replies = (await pipeline.exec()) ?? []
        const data = shown.flatMap((id, i) => {
          const d = deliveryOf(id, (replies[i]?.[1] ?? {}) as Record<string, string>)
          return d === null ? [] : [d]
        })
        return { data, hasMore: ids.length > page.limit }
      })
    },
    async due(until, limit) {
      return withRedis(redis, async () => {
        const flat = await redis.zrangebyscore(k.due, '-inf', String(until), 'WITHSCORES', 'LIMIT', 0, limit)
        const out: Array<Pick<Delivery, 'id' | 'createdAt' | 'nextAttemptAt'>> = []
        const pipeline = redis.pipeline()
        for (let i = 0; i < flat.length; i += 2) pipeline.hget(k.dl(flat[i] ?? ''), 'created')
        const created = (await pipeline.exec()) ?? []
        for (let i = 0; i < flat.length; i += 2) {
          const id = flat[i] ?? ''
          out.push({ id, createdAt: Number(created[i / 2]?.[1] ?? 0), nextAttemptAt: Number(flat[i + 1]) })
        }
        return out
      })
    },
    async prune(before) {
      let total = 0
      for (let round = 0; round < 1000; round++) {
        const n = Number(await run(PRUNE, [k.fin, k.evs], [ns, before, PRUNE_BATCH]))
        total += n
        if (n < PRUNE_BATCH) break
      }
      return total
    },

    ping: () => pingRedis(redis, k.eps),
    close: () => closeRedis(redis),
  }
}
