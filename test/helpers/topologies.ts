// The Redis Cluster and Sentinel set of test/helpers/redis-topologies.sh, for tests: make
// sure one is running (the script starts it when it is not: tests never skip), the
// environment a gateway needs to use it, the node that serves Tollgate's keys (the {tg}
// slot), and killing and restarting a node for failover tests.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { Cluster, Redis } from 'ioredis'
import type { RedisTarget } from '../../src/config/redis-target.ts'
import { createRedisClient, type RedisConnection } from '../../src/store/redis-client.ts'

const run = promisify(execFile)
const SCRIPT = resolve(import.meta.dirname, 'redis-topologies.sh')

export type TopologyKind = 'cluster' | 'sentinel'

export const CLUSTER_PORTS = [7100, 7101, 7102, 7103, 7104, 7105] as const
export const SENTINEL_DATA_PORTS = [7200, 7201] as const
export const SENTINEL_PORTS = [27200, 27201, 27202] as const
export const MASTER_NAME = 'tollgate'
const HOST = '127.0.0.1'
/** CLUSTER KEYSLOT tg: every key of Tollgate's is under the {tg} hash tag. */
export const TG_SLOT = 6364

export const TARGETS: Readonly<Record<TopologyKind, RedisTarget>> = {
  cluster: { kind: 'cluster', nodes: CLUSTER_PORTS.map((port) => ({ host: HOST, port })), tls: false, auth: {} },
  sentinel: {
    kind: 'sentinel',
    sentinels: SENTINEL_PORTS.map((port) => ({ host: HOST, port })),
    masterName: MASTER_NAME,
    tls: false,
    sentinelTls: false,
    auth: {},
    sentinelAuth: {},
  },
}

/** Starts the topology unless it is running and healthy (then it is reused). */
export async function ensureTopology(kind: TopologyKind): Promise<void> {
  try {
    await run(SCRIPT, ['up', kind], { timeout: 180_000 })
  } catch (error) {
    const e = error as { stderr?: string; message: string }
    throw new Error(`the Redis ${kind} did not come up: ${e.stderr ?? e.message}`, { cause: error })
  }
}

/** Starts a stopped node again and waits until the whole topology is healthy. */
export async function restartNode(port: number): Promise<void> {
  await run(SCRIPT, ['start-node', String(port)], { timeout: 180_000 })
}

/** What a gateway's environment sets to use the topology (the way an operator would). */
export function gatewayEnv(kind: TopologyKind): Record<string, string> {
  if (kind === 'cluster') return { REDIS_CLUSTER_NODES: CLUSTER_PORTS.map((p) => `${HOST}:${p}`).join(',') }
  return { REDIS_SENTINELS: SENTINEL_PORTS.map((p) => `${HOST}:${p}`).join(','), REDIS_SENTINEL_NAME: MASTER_NAME }
}

/** A client for the test itself (inspection, clean-up). */
export function topologyClient(kind: TopologyKind): RedisConnection {
  return createRedisClient(TARGETS[kind], { commandTimeoutMs: 3000, name: 'tgtest-topology' })
}

async function withNode<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T | undefined> {
  const redis = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: 500,
    commandTimeout: 1000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
  })
  redis.on('error', () => {})
  try {
    await redis.connect()
    return await fn(redis)
  } catch {
    return undefined
  } finally {
    redis.disconnect()
  }
}

/** The port of the master that serves Tollgate's keys now, as the topology itself says. */
export async function masterPort(kind: TopologyKind): Promise<number | undefined> {
  if (kind === 'sentinel') {
    for (const port of SENTINEL_PORTS) {
      const addr = await withNode(port, (r) => r.call('SENTINEL', 'get-master-addr-by-name', MASTER_NAME))
      if (Array.isArray(addr) && addr.length === 2) return Number(addr[1])
    }
    return undefined
  }
  for (const port of CLUSTER_PORTS) {
    const slots = await withNode(port, (r) => r.call('CLUSTER', 'SLOTS'))
    if (!Array.isArray(slots)) continue
    for (const range of slots as unknown[][]) {
      const [from, to, master] = range as [number, number, [string, number] | undefined]
      if (from <= TG_SLOT && TG_SLOT <= to && master) return Number(master[1])
    }
  }
  return undefined
}

/** The slot ranges of the cluster and the port of each range's master, as some node says now. */
async function clusterSlots(): Promise<Array<{ from: number; to: number; port: number }>> {
  for (const port of CLUSTER_PORTS) {
    const slots = await withNode(port, (r) => r.call('CLUSTER', 'SLOTS'))
    if (!Array.isArray(slots)) continue
    return (slots as unknown[][]).flatMap((range) => {
      const [from, to, master] = range as [number, number, [string, number] | undefined]
      return master ? [{ from, to, port: Number(master[1]) }] : []
    })
  }
  return []
}

/** CLUSTER KEYSLOT of a name, asked of the first node that answers. */
async function keyslot(name: string): Promise<number> {
  for (const port of CLUSTER_PORTS) {
    const slot = await withNode(port, (r) => r.call('CLUSTER', 'KEYSLOT', name))
    if (typeof slot === 'number') return slot
  }
  throw new Error('no cluster node answers CLUSTER KEYSLOT')
}

/** The ports of every master now: the cluster's (in port order), or Sentinel's one. */
export async function masterPorts(kind: TopologyKind): Promise<number[]> {
  if (kind === 'sentinel') {
    const port = await masterPort(kind)
    return port === undefined ? [] : [port]
  }
  return [...new Set((await clusterSlots()).map((r) => r.port))].sort((a, b) => a - b)
}

/**
 * An owner whose keys' per-call state (`{o:<owner>}`, store/redis-kit.ts) lives on the
 * master at `port` now: `<stem>-<n>` for the first n that hashes there.
 */
export async function ownerOnMaster(port: number, stem: string): Promise<string> {
  return await nameOnMaster(port, stem, (owner) => `{o:${owner}}`)
}

/** `<stem>-<n>` for the first n whose key name, as `keyOf` makes it, lives on the master at `port` now. */
export async function nameOnMaster(port: number, stem: string, keyOf: (name: string) => string): Promise<string> {
  const ranges = await clusterSlots()
  for (let n = 0; n < 10_000; n++) {
    const name = `${stem}-${n}`
    const slot = await keyslot(keyOf(name))
    if (ranges.some((r) => r.from <= slot && slot <= r.to && r.port === port)) return name
  }
  throw new Error(`no name of ${stem}-n hashes to the master on ${port}`)
}

/** Kills a Redis node outright (SIGKILL: no goodbye to its clients); resolves once it is gone. */
export async function killNode(port: number): Promise<void> {
  const info = await withNode(port, (r) => r.info('server'))
  const pid = Number(/process_id:(\d+)/.exec(info ?? '')?.[1])
  if (!(pid > 0)) throw new Error(`no Redis process answers on ${port}`)
  process.kill(pid, 'SIGKILL')
  for (let i = 0; i < 100; i++) {
    if ((await withNode(port, (r) => r.ping())) === undefined) return
    await new Promise((done) => setTimeout(done, 50))
  }
  throw new Error(`Redis on ${port} still answers after SIGKILL`)
}

/** Every key under `prefix`: SCAN on each master (on a cluster, a key lives on one of them). */
export async function keysUnderPrefix(redis: RedisConnection, prefix: string): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis]
  const found = new Set<string>()
  for (const node of nodes) {
    let cursor = '0'
    for (let round = 0; round < 100_000; round++) {
      const [next, batch] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      for (const key of batch) found.add(key)
      cursor = next
      if (cursor === '0') break
    }
  }
  return [...found]
}

/** Deletes every key under `prefix` (one DEL per key: on a cluster they may be on different slots). */
export async function deleteUnderPrefix(redis: RedisConnection, prefix: string): Promise<void> {
  for (const key of await keysUnderPrefix(redis, prefix)) await redis.del(key)
}

/** Zeroes every master's INFO commandstats (CONFIG RESETSTAT), for a count that starts now. */
export async function resetMasterStats(redis: Cluster): Promise<void> {
  await Promise.all(redis.nodes('master').map((node) => node.config('RESETSTAT')))
}

/** Per master (by port): the scripts it ran (EVAL + EVALSHA calls) since its stats were reset. */
export async function scriptCallsPerMaster(redis: Cluster): Promise<Map<number, number>> {
  const out = new Map<number, number>()
  for (const node of redis.nodes('master')) {
    const stats = await node.info('commandstats')
    const calls = (name: string): number => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
    out.set(Number(node.options.port), calls('evalsha') + calls('eval'))
  }
  return out
}
