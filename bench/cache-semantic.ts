// The semantic cache (src/cache/semantic*.ts): what a semantic lookup adds to a miss.
// 1. End to end: two gateways on the embedded store in front of the built-in mock, one with
//    the exact cache only, one with the semantic cache on too (its embedding model served by a
//    fake embeddings upstream in this process, 768 floats a vector), N vectors already in the
//    caller's scope; one call at a time, rounds alternating between the gateways. The
//    difference is the embeddings call through the corridor (admitted, sent, metered) and
//    the search.
// 2. The search alone, in process, over N vectors of one scope's partition: the memory index,
//    and the Redis index (HKEYS of the partition; the vectors this instance has not opened
//    yet fetched and opened; then the same dot products), for the N the bounds allow.
//
//   node bench/cache-semantic.ts   prints a Markdown section (bench/cache.ts prints it too)
import { Redis } from 'ioredis'
import { createSealer } from '../src/cache/seal.ts'
import { createMemorySemanticIndex, nearest, unit, type SemanticIndex } from '../src/cache/semantic-index.ts'
import { createRedisSemanticIndex } from '../src/cache/semantic-redis.ts'
import { startCacheGateway } from '../test/cache/helpers.ts'
import { startFakeEmbedder, startSemanticGateway } from '../test/cache/semantic-helpers.ts'
import { REDIS_URL } from '../test/helpers/redis.ts'
import { cpuMsOf, fmt } from './proxy-rig.ts'

const DIMS = 768
const IN_SCOPE = 300
const CALLS = 60
const ROUNDS = 3
const MODEL = 'Llama-3.3-70B-Instruct'

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

/** Normally distributed floats: two random vectors of 768 are nearly orthogonal (cos ~ ±0.04). */
function randomVector(): number[] {
  return Array.from(
    { length: DIMS },
    () => Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random()),
  )
}

async function calls(url: string, key: string, pid: number, prompts: readonly string[], expect: string) {
  const cpu0 = cpuMsOf(pid)
  const times: number[] = []
  for (const content of prompts) {
    const start = performance.now()
    const res = await fetch(`${url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, temperature: 0, max_tokens: 8, messages: [{ role: 'user', content }] }),
    })
    await res.arrayBuffer()
    times.push(performance.now() - start)
    if (res.status !== 200 || res.headers.get('x-tollgate-cache') !== expect)
      throw new Error(`${res.status} ${res.headers.get('x-tollgate-cache')}, expected ${expect}`)
  }
  return { cpuUs: ((cpuMsOf(pid) - cpu0) * 1000) / prompts.length, ms: median(times) }
}

async function endToEnd(): Promise<{ exact: [number, number]; semantic: [number, number] }> {
  const embedder = await startFakeEmbedder(DIMS)
  let n = 0
  const fresh = (count: number): string[] =>
    Array.from({ length: count }, () => {
      const prompt = `bench prompt ${n++}`
      embedder.vectors.set(prompt, randomVector())
      return prompt
    })
  const limits = { '*': { rpm: 1_000_000, input_tpm: 1e9, output_tpm: 1e9 } }
  const exactGw = await startCacheGateway({ store: 'embedded' })
  const semGw = await startSemanticGateway({ store: 'embedded', embedder })
  try {
    const exactKey = (await exactGw.createKey({ tier: 'Standard4000', owner: 'bench', limits })).key
    const semKey = (await semGw.createKey({ tier: 'Standard4000', owner: 'bench', limits })).key
    await calls(semGw.url, semKey, semGw.child.pid ?? 0, fresh(IN_SCOPE), 'miss') // N vectors in the scope
    const exact = { cpu: [] as number[], ms: [] as number[] }
    const semantic = { cpu: [] as number[], ms: [] as number[] }
    for (let r = 0; r < ROUNDS; r++) {
      const e = await calls(exactGw.url, exactKey, exactGw.child.pid ?? 0, fresh(CALLS), 'miss')
      // Each of these adds a vector: the scope holds N..N+ROUNDS*CALLS while measured.
      const s = await calls(semGw.url, semKey, semGw.child.pid ?? 0, fresh(CALLS), 'miss')
      exact.cpu.push(e.cpuUs)
      exact.ms.push(e.ms)
      semantic.cpu.push(s.cpuUs)
      semantic.ms.push(s.ms)
    }
    return {
      exact: [median(exact.cpu), median(exact.ms)],
      semantic: [median(semantic.cpu), median(semantic.ms)],
    }
  } finally {
    await exactGw.stop()
    await semGw.stop()
    await embedder.close()
  }
}

const LABELS = { keyId: 'k', owner: 'o', tenant: 'o', model: MODEL }

/** Microseconds to fetch and search one partition: the first lookup, then the median of 15 more. */
async function searchUs(index: SemanticIndex, scope: string): Promise<[number, number]> {
  const query = unit(randomVector())!
  const times: number[] = []
  for (let i = 0; i < 16; i++) {
    const start = performance.now()
    nearest(query, await index.vectors(scope, 'p'), 0.95, 3)
    times.push((performance.now() - start) * 1000)
  }
  return [times[0] ?? 0, median(times.slice(1))]
}

async function fill(index: SemanticIndex, scope: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await index.add(scope, 'p', `key${i}`, unit(randomVector())!, 3_600_000, LABELS)
}

/** Per N: the memory index's lookup, and the Redis index's first (every vector fetched and opened) and later ones. */
async function search(): Promise<Array<[number, number, number, number]>> {
  const bounds = { scopeMaxVectors: 100_000, scopeMaxBytes: 2 ** 31, maxBytes: 2 ** 31 }
  const redis = new Redis(REDIS_URL)
  const prefix = `bench-semcache-${process.pid}:`
  const sealer = createSealer('a bench secret of 32 characters!')
  const rows: Array<[number, number, number, number]> = []
  try {
    for (const count of [100, 1000, 2000]) {
      const memory = createMemorySemanticIndex(bounds)
      await fill(memory, 'o:m', count)
      const [, memoryUs] = await searchUs(memory, 'o:m')
      await fill(createRedisSemanticIndex(redis, prefix, bounds, sealer), `o:r${count}`, count)
      // Another instance (as after a restart, or another gateway of the fleet): nothing opened yet.
      const [coldUs, warmUs] = await searchUs(createRedisSemanticIndex(redis, prefix, bounds, sealer), `o:r${count}`)
      rows.push([count, memoryUs, coldUs, warmUs])
    }
  } finally {
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  }
  return rows
}

export async function benchSemanticCache(): Promise<string> {
  const e2e = await endToEnd()
  const rows = await search()
  const ms = (us: number): string => (us / 1000).toFixed(2)
  return [
    '## Semantic cache: what a lookup adds to a miss (bench/cache-semantic.ts)',
    '',
    `End to end, one call at a time, ${CALLS} misses a gateway a round, ${ROUNDS} rounds alternating,`,
    `medians; chat replies of 8 tokens from the mock; the semantic gateway's scope holds ${IN_SCOPE}–${IN_SCOPE + CALLS * ROUNDS}`,
    `vectors of ${DIMS} floats, its embeddings served by a fake upstream in the bench process.`,
    '',
    '| Miss | gateway CPU µs per call | latency ms |',
    '|---|---|---|',
    `| exact only | ${fmt(e2e.exact[0])} | ${e2e.exact[1].toFixed(2)} |`,
    `| exact, then semantic (embeddings call + search) | ${fmt(e2e.semantic[0])} | ${e2e.semantic[1].toFixed(2)} |`,
    `| added | ${fmt(e2e.semantic[0] - e2e.exact[0])} (${(e2e.semantic[0] / e2e.exact[0]).toFixed(2)}×) | ${(e2e.semantic[1] - e2e.exact[1]).toFixed(2)} |`,
    '',
    `The search alone, in process, one partition of N vectors of ${DIMS} floats (median of 15):`,
    '',
    '| N vectors | memory index ms | Redis, first lookup of an instance ms (HKEYS + HMGET all + open each + search) | Redis, later lookups ms (HKEYS + search) |',
    '|---|---|---|---|',
    ...rows.map(([n, m, cold, warm]) => `| ${fmt(n)} | ${ms(m)} | ${ms(cold)} | ${ms(warm)} |`),
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchSemanticCache()}\n`)
