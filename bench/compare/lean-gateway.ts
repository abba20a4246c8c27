// The floor of `node bench/floor.ts`: the least a gateway of Tollgate's shape does per JSON
// chat call, written as plainly as the chosen packages allow, to measure what that shape
// costs before any of Tollgate's own work. It reads and parses the body, finds the key in a
// map, admits the call in one Redis script (five counters: GET, PTTL and INCRBY each, as
// Tollgate's limiter does), relays it with http-proxy-3 over a keep-alive agent, reads the
// reply whole and takes its usage, answers with the six x-ratelimit-* headers, bumps one
// counter and one histogram of prom-client, and settles in a second script (five counters
// and a usage row). No validation, no accounting of failures, no logs, no timeouts, no
// streams: anything Tollgate adds beyond this is its own. Prints {"port": N}.
//
// Without a Redis url it admits and settles nothing: the shape's cost without limits.
//
//   node bench/compare/lean-gateway.ts <upstream url> [redis url]
import http from 'node:http'
import { Stream } from 'node:stream'
import { createProxyServer } from 'http-proxy-3'
import { Redis } from 'ioredis'
import { Counter, Histogram, Registry } from 'prom-client'
import { serveChild } from './child-server.ts'

const [upstream, redisUrl] = process.argv.slice(2)
if (!upstream) throw new Error('usage: lean-gateway.ts <upstream url> [redis url]')

const ADMIT = `
local now = redis.call('TIME')[1]
for i, key in ipairs(KEYS) do
  local used = tonumber(redis.call('GET', key) or '0')
  if used + tonumber(ARGV[i]) > tonumber(ARGV[#KEYS + 1]) then return {0, i} end
end
for i, key in ipairs(KEYS) do
  redis.call('INCRBY', key, ARGV[i])
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, 60000) end
end
return {1, now}`
const SETTLE = `
for i, key in ipairs(KEYS) do
  if i < #KEYS then redis.call('INCRBY', key, ARGV[i]) end
end
redis.call('HINCRBY', KEYS[#KEYS], 'requests', 1)
redis.call('HINCRBY', KEYS[#KEYS], 'inputTokens', ARGV[#KEYS])
redis.call('HINCRBY', KEYS[#KEYS], 'outputTokens', ARGV[#KEYS + 1])
return 1`

const redis = redisUrl === undefined ? undefined : new Redis(redisUrl)
redis?.defineCommand('admit', { lua: ADMIT })
redis?.defineCommand('settle', { lua: SETTLE })
interface Scripts {
  admit(...args: Array<string | number>): Promise<[number, number]>
  settle(...args: Array<string | number>): Promise<number>
}
const scripts: Scripts =
  redis === undefined ? { admit: async () => [1, 0], settle: async () => 1 } : (redis as unknown as Scripts)

const registry = new Registry()
const calls = new Counter({
  name: 'calls_total',
  help: 'calls',
  labelNames: ['model', 'status'],
  registers: [registry],
})
const seconds = new Histogram({ name: 'call_seconds', help: 'time', labelNames: ['model'], registers: [registry] })

const LIMIT = 1_000_000_000
const keys = new Map<string, string>()

/** A body in memory: http-proxy-3 pipes it (a no-op); 'proxyReq' ends the request with the bytes. */
class Bytes extends Stream {
  readonly bytes: Buffer
  constructor(bytes: Buffer) {
    super()
    this.bytes = bytes
  }
  override pipe<T extends NodeJS.WritableStream>(destination: T): T {
    return destination
  }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 })
const proxy = createProxyServer({ agent, selfHandleResponse: true, ignorePath: true })
proxy.on('proxyReq', (proxyReq, _req, _res, options) => {
  const body = options.buffer as Bytes
  proxyReq.setHeader('content-length', body.bytes.length)
  proxyReq.removeHeader('authorization')
  proxyReq.end(body.bytes)
})
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502).end()
  else res.destroy()
})

function counters(keyId: string, model: string): string[] {
  return ['r', 't', 'i', 'o', 'q'].map((d) => `lean:{${keyId}}:${model}:${d}`)
}

async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const started = performance.now()
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const bytes = Buffer.concat(chunks)
  const body = JSON.parse(bytes.toString('utf8')) as { model: string; max_tokens?: number }
  const bearer = req.headers.authorization?.slice(7) ?? ''
  let keyId = keys.get(bearer)
  if (keyId === undefined) keys.set(bearer, (keyId = `key_${keys.size}`))
  const names = counters(keyId, body.model)
  const estimate = Math.ceil(bytes.length / 4) + (body.max_tokens ?? 16)
  const [admitted] = await scripts.admit(names.length, ...names, 1, estimate, estimate, 0, estimate, LIMIT)
  if (admitted !== 1) {
    res.writeHead(429).end()
    return
  }
  const reply = await new Promise<{ status: number; bytes: Buffer }>((resolve, reject) => {
    proxy.web(req, res, { target: `${upstream}/v1/chat/completions`, buffer: new Bytes(bytes) }, reject)
    // selfHandleResponse: the reply is read here, whole.
    pending.set(res, (proxyRes) => {
      const parts: Buffer[] = []
      proxyRes.on('data', (chunk: Buffer) => parts.push(chunk))
      proxyRes.on('end', () => resolve({ status: proxyRes.statusCode ?? 502, bytes: Buffer.concat(parts) }))
      proxyRes.on('error', reject)
    })
  })
  const usage = (JSON.parse(reply.bytes.toString('utf8')) as { usage?: Record<string, number> }).usage ?? {}
  const input = usage.prompt_tokens ?? 0
  const output = usage.completion_tokens ?? 0
  res.writeHead(reply.status, {
    'content-type': 'application/json',
    'content-length': reply.bytes.length,
    'x-request-id': `req_${started.toFixed(3)}`,
    'x-ratelimit-limit-requests': LIMIT,
    'x-ratelimit-remaining-requests': LIMIT - 1,
    'x-ratelimit-reset-requests': '60s',
    'x-ratelimit-limit-tokens': LIMIT,
    'x-ratelimit-remaining-tokens': LIMIT - input - output,
    'x-ratelimit-reset-tokens': '60s',
  })
  res.end(reply.bytes)
  calls.inc({ model: body.model, status: String(reply.status) })
  seconds.observe({ model: body.model }, (performance.now() - started) / 1000)
  const spent = input + output
  await scripts.settle(
    names.length + 1,
    ...names,
    `lean:{${keyId}}:usage`,
    0,
    spent - estimate,
    input,
    output,
    0,
    input,
    output,
  )
}

const pending = new WeakMap<http.ServerResponse, (proxyRes: http.IncomingMessage) => void>()
proxy.on('proxyRes', (proxyRes, _req, res) => pending.get(res)?.(proxyRes))

serveChild(
  http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end()
      else res.destroy()
    })
  }),
  () => {
    agent.destroy()
    redis?.disconnect()
  },
)
