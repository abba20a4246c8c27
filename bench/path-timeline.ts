// The critical path of one call, timestamped (issue 40 item 1): `node bench/path-timeline.ts`
// starts the bench upstream, a private Redis, and Tollgate on each store (limits on) with the
// preload bench/path-stamps.ts, sends CALLS JSON chat completions one at a time, and prints,
// per store, the median time (ms after the request's headers were parsed) of each event of a
// call: Redis and upstream writes and reads, setImmediate / setTimeout callbacks and where
// they were scheduled, the writes to the client and the response's finish, up to the next
// request. What lies between two events is CPU or a wait; a callback scheduled for a later
// turn between the request and its upstream write is a wait no round trip needs.
//
//   node bench/path-timeline.ts [--calls 400] [--store embedded|redis] [--tier On|Off] [--root <checkout>]
import http from 'node:http'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { startTollgate } from '../test/helpers/gateway.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { GATEWAY_ENV, GATEWAY_NODE_FLAGS, startChild } from './compare.ts'
import { machine } from './machine.ts'
import { chatBody, fmt, LIMITS_OFF_AND_ON } from './proxy-rig.ts'

const { values: args } = parseArgs({
  options: {
    calls: { type: 'string', default: '400' },
    store: { type: 'string' },
    tier: { type: 'string', default: 'On' },
    root: { type: 'string' },
  },
})
const CALLS = Number(args.calls)
const DROP = Math.min(100, Math.floor(CALLS / 4))
const MODEL = 'bench-chat'
const BODY = chatBody(MODEL, 16)
const PRELOAD = join(import.meta.dirname, 'path-stamps.ts')

type Stamp = [number, string]

function call(port: number, agent: http.Agent, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/v2/chat/completions',
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(BODY),
          authorization: `Bearer ${key}`,
        },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.on('error', reject)
    req.end(BODY)
  })
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? NaN
}

/** Each event labelled with its occurrence in the call (the 2nd Redis write is "redis write #2"). */
function summarise(calls: Stamp[][]): string[] {
  const times = new Map<string, number[]>()
  const order: string[] = []
  for (const events of calls) {
    const seen = new Map<string, number>()
    for (const [ms, label] of events) {
      const n = (seen.get(label) ?? 0) + 1
      seen.set(label, n)
      const name = n === 1 ? label : `${label} #${n}`
      if (!times.has(name)) {
        times.set(name, [])
        order.push(name)
      }
      times.get(name)?.push(ms)
    }
  }
  return order
    .map((name) => ({ name, ms: median(times.get(name) ?? []), share: (times.get(name)?.length ?? 0) / calls.length }))
    .filter((e) => e.share >= 0.5)
    .sort((a, b) => a.ms - b.ms)
    .map(
      (e) => `| ${fmt(e.ms, 3)} | ${e.name}${e.share < 0.95 ? ` (in ${Math.round(e.share * 100)}% of calls)` : ''} |`,
    )
}

const redis = await startPrivateRedis()
const upstream = await startChild('fast-upstream.ts', [])
const upstreamPort = Number(new URL(upstream.url).port)
const redisPort = Number(new URL(redis.url).port)
const stores = args.store === undefined ? (['embedded', 'redis'] as const) : [args.store as 'embedded' | 'redis']
const lines: string[] = []
try {
  for (const store of stores) {
    const file = join(mkdtempSync(join(tmpdir(), 'path-stamps-')), 'calls.json')
    const gw = await startTollgate({
      ...(args.root === undefined ? {} : { root: args.root }),
      dropRequestLogs: true,
      execArgv: [...GATEWAY_NODE_FLAGS, '--import', PRELOAD],
      env: {
        ...GATEWAY_ENV,
        PATH_STAMPS_OUT: file,
        PATH_STAMPS_REDIS_PORT: String(redisPort),
        PATH_STAMPS_UPSTREAM_PORT: String(upstreamPort),
        ...(store === 'redis'
          ? { REDIS_URL: redis.url, TOLLGATE_KEY_SECRET: 'bench-secret-bench-secret-bench-secret' }
          : {}),
      },
      config: (doc) => {
        doc.plans = LIMITS_OFF_AND_ON
        doc.backends = { upstream: { type: 'openai', baseUrl: `${upstream.url}/v1`, maxSockets: 1024 } }
        doc.resourceBackend = 'upstream'
        doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'upstream' }] }]
        ;(doc.store as Record<string, unknown>).keyPrefix = `timeline:${store}:`
      },
    })
    const { key } = await gw.createKey({ tier: args.tier })
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
    const port = Number(new URL(gw.url).port)
    for (let i = 0; i < CALLS; i++) {
      const status = await call(port, agent, key)
      if (status !== 200) throw new Error(`call ${i}: ${status}`)
    }
    agent.destroy()
    await gw.stop()
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as { calls: Stamp[][]; sites: Record<string, number> }
    const calls = recorded.calls.slice(DROP)
    lines.push(
      '',
      `${store}, limits ${args.tier === 'On' ? 'on' : 'off'}: ${calls.length} calls (the first ${DROP} dropped), median ms after the request's headers`,
      '',
      '| ms | event |',
      '|---|---|',
      ...summarise(calls),
      '',
      'Where the callbacks were scheduled (every tenth call, all its callbacks):',
      '',
      ...Object.entries(recorded.sites)
        .sort((a, b) => b[1] - a[1])
        .map(([site, n]) => `- ${site}: ${n}`),
    )
  }
} finally {
  await upstream.stop()
  await redis.kill()
}
process.stdout.write(`${lines.join('\n')}\n\n${machine()}\n`)
