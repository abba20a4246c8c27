// What one key's stored asynchronous requests cost the gateway: a Basic key (20 RPM)
// submits N requests of ~50 KB each (Prefer: respond-async, 32 in flight), as fast as it
// is answered. Measured: how many were accepted (and refused 429 queue_full), the gateway
// process's RSS before, right after and after 10 s idle, the data directory on disk (or
// Redis used_memory), and the time of GET /queue/requests (limit=100, plain and filtered)
// of that key and of another key of the same tier.
//
// With --v2 the same bodies go to /v2/chat/completions instead (nothing is stored; past
// the key's 20 RPM they are refused 429 after being read and checked): what the gateway's
// RSS does for the same traffic when it stores nothing.
//
//   node bench/queue-storage.ts [--redis] [--v2] [--root <checkout>] [--count 2000] [--kb 50]
import { randomBytes } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { createRedisClient } from '../src/store/redis-client.ts'
import { startTollgate } from '../test/helpers/gateway.ts'
import { keysUnder, REDIS_URL } from '../test/helpers/redis.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const { values } = parseArgs({
  options: {
    redis: { type: 'boolean' },
    v2: { type: 'boolean' },
    root: { type: 'string' },
    count: { type: 'string' },
    kb: { type: 'string' },
  },
})
const COUNT = Number(values.count ?? 2000)
const KB = Number(values.kb ?? 50)
const IN_FLIGHT = 32

const rssMb = (pid: number): number =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024
const PROBE = ['--expose-gc', '--import', new URL('./gc-probe.ts', import.meta.url).pathname]

/** The V8 heap still in use after a full collection (MB), as bench/gc-probe.ts reports it. */
async function heapMb(gw: { child: { kill(signal: NodeJS.Signals): boolean }; output(): string }): Promise<number> {
  const seen = gw.output().split('gc-heap ').length
  gw.child.kill('SIGUSR2')
  for (let i = 0; i < 100 && gw.output().split('gc-heap ').length === seen; i++)
    await new Promise((done) => setTimeout(done, 50))
  const last = gw.output().split('gc-heap ').at(-1) ?? '{}'
  return Number((JSON.parse(last.slice(0, last.indexOf('}') + 1)) as { usedMb?: number }).usedMb ?? NaN)
}
const prefix = `benchqs${randomBytes(4).toString('hex')}:`
const redis =
  values.redis === true ? createRedisClient(REDIS_URL, { commandTimeoutMs: 5000, name: 'bench-queue-storage' }) : null
const redisMemMb = async (): Promise<number> =>
  redis === null ? 0 : Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0) / 1048576

const gw = await startTollgate({
  ...(values.root === undefined ? {} : { root: values.root }),
  dropRequestLogs: true,
  execArgv: PROBE,
  config: (doc) => {
    if (redis !== null)
      Object.assign(doc.store as Record<string, unknown>, { keyPrefix: prefix, commandTimeoutMs: 5000 })
  },
  ...(redis === null ? {} : { env: { REDIS_URL, TOLLGATE_KEY_SECRET: `bench-${randomBytes(16).toString('hex')}` } }),
})
const pid = gw.child.pid ?? 0
try {
  // Bodies past the tier's input TPM would be refused as never fitting: the key's token
  // limits are raised for them (its 20 RPM stays), so only storage can refuse them.
  const attacker = await gw.createKey({
    name: 'attacker',
    tier: 'Basic',
    ...(KB > 50 ? { limits: { '*': { input_tpm: 1_000_000_000 }, [MODEL]: { input_tpm: 1_000_000_000 } } } : {}),
  })
  const other = await gw.createKey({ name: 'other', tier: 'Basic' })
  const filler = 'x'.repeat(KB * 1024)
  await new Promise((done) => setTimeout(done, 2000))
  const rss0 = rssMb(pid)
  const heap0 = await heapMb(gw)
  const mem0 = await redisMemMb()
  const started = performance.now()
  const statuses = new Map<number, number>()
  let next = 0
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < COUNT) {
        next++
        const res = await fetch(`${gw.url}/${values.v2 === true ? 'v2' : 'queue'}/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${attacker.key}`,
            'content-type': 'application/json',
            ...(values.v2 === true ? {} : { prefer: 'respond-async' }),
          },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: filler }], max_tokens: 5 }),
        })
        await res.arrayBuffer()
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      }
    }),
  )
  const submitS = (performance.now() - started) / 1000
  const rss1 = rssMb(pid)
  const heap1 = await heapMb(gw)
  const mem1 = await redisMemMb()
  await new Promise((done) => setTimeout(done, 10_000))
  const rss2 = rssMb(pid)
  const heap2 = await heapMb(gw)
  const timed = async (key: string, query: string): Promise<string> => {
    const t0 = performance.now()
    const res = await fetch(`${gw.url}/queue/requests?${query}`, { headers: { authorization: `Bearer ${key}` } })
    const body = (await res.json()) as { data?: unknown[]; has_more?: boolean }
    return `${res.status} ${body.data?.length ?? '-'} items, has_more ${String(body.has_more)}, ${(performance.now() - t0).toFixed(0)} ms`
  }
  const lists = {
    own: await timed(attacker.key, 'limit=100'),
    ownQueued: await timed(attacker.key, 'status=queued&limit=100'),
    ownCompleted: await timed(attacker.key, 'status=completed&limit=100'),
    other: await timed(other.key, 'limit=100'),
  }
  const disk = redis === null ? execFileSync('du', ['-sm', gw.dataDir], { encoding: 'utf8' }).split('\t')[0] : '-'
  const rows = [
    [
      'requests sent',
      `${COUNT} x ${KB} KB to ${values.v2 === true ? '/v2' : '/queue (async)'} in ${submitS.toFixed(1)} s`,
    ],
    ['answers', [...statuses].map(([s, n]) => `${n} x ${s}`).join(', ')],
    ['gateway RSS (MB) before / after / 10 s idle', `${rss0.toFixed(0)} / ${rss1.toFixed(0)} / ${rss2.toFixed(0)}`],
    [
      'gateway V8 heap live after a GC (MB) before / after / 10 s idle',
      `${heap0.toFixed(0)} / ${heap1.toFixed(0)} / ${heap2.toFixed(0)}`,
    ],
    redis === null
      ? ['data dir on disk (MB)', disk ?? '-']
      : ['Redis used_memory (MB) before / after', `${mem0.toFixed(0)} / ${mem1.toFixed(0)}`],
    ['GET /queue/requests?limit=100 (own)', lists.own],
    ['... ?status=queued&limit=100 (own)', lists.ownQueued],
    ['... ?status=completed&limit=100 (own)', lists.ownCompleted],
    ['... ?limit=100 (another key)', lists.other],
  ]
  process.stdout.write(
    `| ${redis === null ? 'embedded' : 'Redis'} | |\n|---|---|\n${rows.map(([a, b]) => `| ${a} | ${b} |`).join('\n')}\n`,
  )
} finally {
  await gw.stop()
  if (redis !== null) {
    const all = await keysUnder(redis, prefix)
    for (let i = 0; i < all.length; i += 500) await redis.del(...all.slice(i, i + 500))
    redis.disconnect()
  }
}
