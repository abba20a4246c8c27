// The mix bench/admission-mix.ts replays (issue 39): one seeded trace of calls, and the fake
// upstream that serves them with the output length the trace chose for each.
//
// Three tenants with fair-share weights 1:1:2. Each sends two streams of Poisson arrivals:
// - `queue`: /queue drop-in calls on QUEUE_MODEL, one deployment of MAX_CONCURRENT calls at a
//   time. The flood offers 3× its capacity, the two others 0.4× and 0.8× (all three
//   backlogged, so each is due its weight's share); classes and deadlines vary by tenant.
// - `v2`: /v2 calls on SOLO_MODEL (a deployment without bounds) under the key's output_tpm:
//   where a reservation that is too large refuses calls that would have fit.
// Output lengths are bimodal (1 − LONG of 20–80 tokens, LONG of 300–900); a share of the
// calls names no max_tokens, the others a cap of about 1.5× what they will produce.
import { createServer, type Server, type ServerResponse } from 'node:http'
import { randomFrom } from '../../src/backends/mock/hash.ts'

export const QUEUE_MODEL = 'mix-queue'
export const SOLO_MODEL = 'mix-solo'
export const MAX_CONCURRENT = 4
/** A reply takes this long per output token upstream (a 600-token one: 6 s). */
export const MS_PER_TOKEN = 10
export const LONG = 0.2
const MEAN_OUTPUT = (1 - LONG) * 50 + LONG * 600
/** Calls per second one deployment of MAX_CONCURRENT serves at the mean length. */
export const CAPACITY = MAX_CONCURRENT / ((MEAN_OUTPUT * MS_PER_TOKEN) / 1000)

export type Cls = 'priority' | 'default' | 'flex'
export interface TenantMix {
  readonly name: string
  readonly weight: number
  /** /queue calls offered, as a multiple of the deployment's capacity. */
  readonly load: number
  readonly classes: ReadonlyArray<readonly [Cls, number]>
  /** Share of its /queue calls that say x-tollgate-max-wait-ms, and the deadline they say. */
  readonly deadlineShare: number
  readonly deadlineMs: number
}

export const TENANTS: readonly TenantMix[] = [
  {
    name: 'flood',
    weight: 1,
    load: 3,
    classes: [
      ['flex', 0.6],
      ['default', 0.4],
    ],
    deadlineShare: 0.2,
    deadlineMs: 8000,
  },
  {
    name: 'light',
    weight: 1,
    load: 0.4,
    classes: [
      ['default', 0.7],
      ['priority', 0.3],
    ],
    deadlineShare: 0.3,
    deadlineMs: 4000,
  },
  {
    name: 'heavy',
    weight: 2,
    load: 0.8,
    classes: [
      ['default', 0.5],
      ['priority', 0.25],
      ['flex', 0.25],
    ],
    deadlineShare: 0.3,
    deadlineMs: 4000,
  },
]

export interface Call {
  readonly id: number
  readonly at: number
  readonly tenant: string
  readonly route: 'queue' | 'v2'
  readonly output: number
  readonly maxTokens?: number
  readonly cls: Cls
  readonly deadlineMs?: number
}

export function trace(seed: number, seconds: number, uncapped: number, v2Rate: number): Call[] {
  const next = randomFrom(seed)
  const calls: Omit<Call, 'id'>[] = []
  const length = (): number => Math.round(next() >= LONG ? 20 + next() * 60 : 300 + next() * 600)
  const pick = (classes: TenantMix['classes']): Cls => {
    let u = next()
    for (const [cls, p] of classes) if ((u -= p) < 0) return cls
    return classes[classes.length - 1]![0]
  }
  for (const t of TENANTS) {
    for (const route of ['queue', 'v2'] as const) {
      const rate = route === 'queue' ? t.load * CAPACITY : v2Rate
      for (
        let at = -Math.log(1 - next()) * (1000 / rate);
        at < seconds * 1000;
        at += -Math.log(1 - next()) * (1000 / rate)
      ) {
        const output = length()
        const capped = next() >= uncapped
        const deadline = route === 'queue' && next() < t.deadlineShare
        calls.push({
          at,
          tenant: t.name,
          route,
          output,
          ...(capped ? { maxTokens: Math.min(1024, Math.max(64, Math.round(output * 1.5))) } : {}),
          cls: pick(t.classes),
          ...(deadline ? { deadlineMs: t.deadlineMs } : {}),
        })
      }
    }
  }
  return calls.sort((a, b) => a.at - b.at).map((c, id) => ({ ...c, id }))
}

/** When the upstream received each call (scheme:id → epoch ms): the call's admission, give or take a hop. */
export type Arrivals = Map<string, number>

/**
 * An OpenAI-shaped upstream: the prompt says `s=<scheme> i=<id> n=<tokens>`; the reply has
 * min(n, max_tokens) completion tokens, after MS_PER_TOKEN each.
 */
export async function startUpstream(arrivals: Arrivals): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as {
        model?: string
        max_tokens?: number
        max_completion_tokens?: number
        messages?: Array<{ content?: string }>
        stream?: boolean
      }
      const prompt = body.messages?.[0]?.content ?? ''
      const m = /s=(\w+) i=(\d+) n=(\d+)/.exec(prompt)
      if (m !== null) arrivals.set(`${m[1]}:${m[2]}`, Date.now())
      const cap = body.max_completion_tokens ?? body.max_tokens ?? Infinity
      const output = Math.min(Number(m?.[3] ?? 10), cap)
      const usage = { prompt_tokens: 20, completion_tokens: output, total_tokens: 20 + output }
      const id = `chatcmpl-${m?.[2] ?? 'x'}`
      if (body.stream === true) return stream(res, id, body.model ?? 'x', output, usage)
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify({
            id,
            object: 'chat.completion',
            created: Math.floor(Date.now() / 1000),
            model: body.model ?? 'x',
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
            usage,
          }),
        )
      }, output * MS_PER_TOKEN)
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server }
}

/** Tokens per streamed chunk: a chunk's content is that many `t`s (a stored request's whole stream can be counted). */
export const CHUNK_TOKENS = 10

/** A streamed reply: a chunk of CHUNK_TOKENS every CHUNK_TOKENS × MS_PER_TOKEN, then the usage and [DONE]. */
function stream(res: ServerResponse, id: string, model: string, output: number, usage: object): void {
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  const event = (delta: object, extra: object = {}): string =>
    `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`
  let sent = 0
  const timer = setInterval(() => {
    if (res.destroyed) return clearInterval(timer)
    if (sent < output) {
      const n = Math.min(CHUNK_TOKENS, output - sent)
      sent += n
      res.write(event({ content: 't'.repeat(n) }))
      return
    }
    clearInterval(timer)
    res.end(`${event({}, { usage })}data: [DONE]\n\n`)
  }, CHUNK_TOKENS * MS_PER_TOKEN)
}
