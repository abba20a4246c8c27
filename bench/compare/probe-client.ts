// The sub-millisecond client of `npm run bench -- compare`, in its own process (autocannon
// keeps whole milliseconds, too coarse for what the gateway adds at a fixed rate):
//
//   rate: an open loop at a fixed offered rate of non-streaming calls over a pool of
//         keep-alive connections; each latency counts from when the call was due, so a
//         stall is not hidden by sending less (no coordinated omission).
//   ttft: one stream at a time; time to the first byte of the body and to the first
//         content token, and the whole stream.
//   many: `streams` streams at once; how many ended 200 with every content chunk and [DONE].
//
//   node bench/compare/probe-client.ts '{"mode":"rate","url":…,"key":…,"rate":2000,"seconds":5}'
//   Prints one JSON line: {"sent","ok","errors","p50","p90","p99","max"} or {"ttfb":[…],"ttft":[…],"total":[…]}
import http from 'node:http'
import { performance } from 'node:perf_hooks'

interface Options {
  readonly mode: 'rate' | 'ttft' | 'many'
  readonly model?: string
  /** Content chunks a whole stream carries (many). */
  readonly tokens?: number
  readonly url: string
  readonly key?: string
  readonly rate?: number
  readonly seconds?: number
  readonly streams?: number
  readonly connections?: number
}
const options = JSON.parse(process.argv[2] ?? '{}') as Options
const target = new URL(options.url)
const agent = new http.Agent({ keepAlive: true, maxSockets: options.connections ?? 64 })

function body(stream: boolean): string {
  return JSON.stringify({
    model: options.model ?? 'bench-chat',
    messages: [{ role: 'user', content: 'Benchmark: say hello in five words.' }],
    max_tokens: 16,
    ...(stream ? { stream: true } : {}),
  })
}

/** POSTs a JSON payload to the target over the pooled agent, with the key when there is one. */
function post(payload: string, onResponse: (res: http.IncomingMessage) => void, onError: () => void): void {
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
  }
  if (options.key) headers.authorization = `Bearer ${options.key}`
  http
    .request(
      { host: target.hostname, port: target.port, path: target.pathname, method: 'POST', agent, headers },
      onResponse,
    )
    .on('error', onError)
    .end(payload)
}

interface Timing {
  status: number
  firstByte: number
  firstToken: number
  end: number
}

function call(payload: string, onFirstToken: boolean): Promise<Timing> {
  return new Promise((resolve) => {
    post(
      payload,
      (res) => {
        let firstByte = NaN
        let firstToken = NaN
        res.on('data', (chunk: Buffer) => {
          const now = performance.now()
          if (Number.isNaN(firstByte)) firstByte = now
          if (onFirstToken && Number.isNaN(firstToken) && chunk.includes('"content":" ')) firstToken = now
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, firstByte, firstToken, end: performance.now() }))
        res.on('error', () => resolve({ status: 0, firstByte, firstToken, end: performance.now() }))
      },
      () => resolve({ status: 0, firstByte: NaN, firstToken: NaN, end: performance.now() }),
    )
  })
}

const q = (sorted: readonly number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN

async function rate(): Promise<void> {
  const perSecond = options.rate ?? 2000
  const ms = (options.seconds ?? 5) * 1000
  const payload = body(false)
  const latencies: number[] = []
  let sent = 0
  let errors = 0
  const pending = new Set<Promise<void>>()
  const start = performance.now()
  await new Promise<void>((done) => {
    const tick = (): void => {
      const now = performance.now()
      const due = Math.min(Math.floor(((now - start) / 1000) * perSecond), Math.floor((ms / 1000) * perSecond))
      while (sent < due) {
        const dueAt = start + (sent / perSecond) * 1000
        sent++
        const p = call(payload, false).then((t) => {
          if (t.status === 200) latencies.push(t.end - dueAt)
          else errors++
          pending.delete(p)
        })
        pending.add(p)
      }
      if (now - start >= ms) done()
      else setImmediate(tick)
    }
    tick()
  })
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  process.stdout.write(
    `${JSON.stringify({ sent, ok: latencies.length, errors, p50: q(latencies, 0.5), p90: q(latencies, 0.9), p99: q(latencies, 0.99), max: latencies.at(-1) ?? NaN })}\n`,
  )
}

async function ttft(): Promise<void> {
  const payload = body(true)
  const ttfb: number[] = []
  const tokens: number[] = []
  const total: number[] = []
  let errors = 0
  for (let i = 0; i < (options.streams ?? 100); i++) {
    const t0 = performance.now()
    const t = await call(payload, true)
    if (t.status !== 200 || Number.isNaN(t.firstToken)) {
      errors++
      continue
    }
    ttfb.push(t.firstByte - t0)
    tokens.push(t.firstToken - t0)
    total.push(t.end - t0)
  }
  const stats = (xs: number[]): { p50: number; p99: number } => {
    xs.sort((a, b) => a - b)
    return { p50: q(xs, 0.5), p99: q(xs, 0.99) }
  }
  process.stdout.write(`${JSON.stringify({ errors, ttfb: stats(ttfb), ttft: stats(tokens), total: stats(total) })}\n`)
}

/** Whole streams: every content chunk and the [DONE]. */
async function many(): Promise<void> {
  const payload = body(true)
  const count = options.streams ?? 1000
  const started = performance.now()
  const outcomes = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<boolean>((resolve) => {
          post(
            payload,
            (res) => {
              let text = ''
              res.setEncoding('utf8')
              res.on('data', (chunk: string) => {
                text += chunk
              })
              res.on('end', () =>
                resolve(
                  res.statusCode === 200 &&
                    text.split('"content":" word').length - 1 === (options.tokens ?? 16) &&
                    text.includes('data: [DONE]'),
                ),
              )
              res.on('error', () => resolve(false))
            },
            () => resolve(false),
          )
        }),
    ),
  )
  process.stdout.write(
    `${JSON.stringify({ streams: count, whole: outcomes.filter(Boolean).length, seconds: (performance.now() - started) / 1000 })}\n`,
  )
}

await (options.mode === 'rate' ? rate() : options.mode === 'ttft' ? ttft() : many())
agent.destroy()
