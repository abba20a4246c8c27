// Two deployments of one model that each enforce a fixed request window, as issue #36 item
// 5 found them: 10 and 20 calls per window of a few seconds, OpenAI's
// x-ratelimit-{limit,remaining,reset}-requests on every reply and retry-after(-ms) on a 429
// (test/helpers/quota-upstream.ts, `window: 'fixed'`), behind one gateway (embedded: the
// memory store; or on Redis). Used by test/e2e/capacity-edge.test.ts and bench/capacity.ts:
// a gateway is taught both figures in one window, then a burst or a /queue backlog arrives
// in a fresh one.
import { randomBytes } from 'node:crypto'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { startQuotaUpstream, type QuotaUpstream } from '../helpers/quota-upstream.ts'
import { REDIS_URL } from '../helpers/redis.ts'
import { post } from '../queue/helpers.ts'

export const EDGE_MODEL = 'edge-model'

export interface FixedWindowsOptions {
  readonly windowMs: number
  /** Calls each deployment takes per window. */
  readonly perWindow: readonly number[]
  /** How long each upstream call takes (a model's generation time), so calls overlap. */
  readonly latencyMs: number
  /** 'redis': the gateway keeps its state on the shared Redis under `prefix`. */
  readonly store: 'memory' | 'redis'
  readonly prefix?: string
}

export interface FixedWindows {
  readonly gateway: RunningTollgate
  readonly upstreams: readonly QuotaUpstream[]
  readonly key: string
  /** What the deployments take per window together. */
  readonly room: number
  readonly windowMs: number
  /** The current window's index (all upstreams share the windows: the same windowMs, the same clock). */
  window(): number
  /** Upstream 429s so far, over every deployment. */
  refused(): number
  /** Sends bursts until the gateway refuses a call: it learned every figure, and the window is spent. */
  learn(): Promise<void>
  /** Waits until a fresh window began and the gateway sees every learned figure past its reset. */
  freshWindow(): Promise<number>
  /** A /v2 call; its status. */
  call(i: number): Promise<number>
  /** A drop-in /queue call (waits for its answer); its status and when it ended. */
  queued(i: number): Promise<{ status: number; endedAt: number }>
  stop(): Promise<void>
}

const chat = (i: number): Record<string, unknown> => ({
  model: EDGE_MODEL,
  messages: [{ role: 'user', content: `call ${i}` }],
  max_tokens: 5,
})

export async function fixedWindows(options: FixedWindowsOptions): Promise<FixedWindows> {
  const { windowMs } = options
  const upstreams: QuotaUpstream[] = []
  for (const per of options.perWindow)
    upstreams.push(
      await startQuotaUpstream({
        rpm: (per * 60_000) / windowMs,
        windowMs,
        window: 'fixed',
        latencyMs: options.latencyMs,
      }),
    )
  const names = upstreams.map((_, i) => `fixed-${i}`)
  const gateway = await startTollgate({
    ...(options.store === 'redis' ? { env: { REDIS_URL, TOLLGATE_KEY_SECRET: randomBytes(24).toString('hex') } } : {}),
    config: (doc) => {
      const backends = doc.backends as Record<string, unknown>
      for (const [i, u] of upstreams.entries()) backends[names[i] as string] = { type: 'openai', baseUrl: u.url }
      ;(doc.models as unknown[]).push({
        name: EDGE_MODEL,
        kind: 'chat',
        deployments: names.map((backend) => ({ backend, window: 'fixed' })),
      })
      doc.queue = { ...(doc.queue as Record<string, unknown> | undefined), maxWaitMs: 20 * windowMs }
      if (options.store === 'redis')
        Object.assign(doc.store as Record<string, unknown>, { keyPrefix: options.prefix, commandTimeoutMs: 3000 })
    },
  })
  const { key } = await gateway.createKey({
    tier: 'Standard4000',
    limits: { '*': { rpm: 1_000_000, input_tpm: 100_000_000, output_tpm: 100_000_000 } },
  })
  const first = upstreams[0] as QuotaUpstream
  const window = (): number => first.windowIndex() ?? 0
  const learnedUntil = async (): Promise<number[]> => {
    const res = await fetch(`${gateway.url}/admin/backends`, {
      headers: { authorization: `Bearer ${gateway.adminToken}` },
    })
    const list = (await res.json()) as {
      data: { name: string; deployments: { state: { learned: { requests_reset_at: string | null } } | null }[] }[]
    }
    const model = list.data.find((m) => m.name === EDGE_MODEL)
    return (model?.deployments ?? []).map((d) => {
      const at = d.state?.learned.requests_reset_at
      return at === null || at === undefined ? 0 : Date.parse(at)
    })
  }
  return {
    gateway,
    upstreams,
    key,
    room: options.perWindow.reduce((a, b) => a + b, 0),
    windowMs,
    window,
    refused: () => upstreams.reduce((n, u) => n + u.stats().rateLimited, 0),
    async learn() {
      // Bursts of more than the room until the gateway refuses one: every deployment answered
      // and its window is spent, as the gateway learned it (remaining 0 until the reset).
      const room = options.perWindow.reduce((a, b) => a + b, 0)
      // In one window, from its start: what the gateway learns is that window's.
      const from = window()
      await pollUntil(
        async () => window(),
        (w) => w > from,
        Math.ceil(windowMs / 5) + 10,
        5,
      )
      const taught = await pollUntil(
        async () => {
          const burst = Array.from({ length: room + 5 }, (_, i) =>
            post(`${gateway.url}/v2/chat/completions`, key, chat(-i)),
          )
          const statuses = (await Promise.all(burst)).map((r) => r.status)
          const odd = statuses.find((s) => s !== 200 && s !== 429)
          if (odd !== undefined) throw new Error(`a learning call answered ${odd}`)
          return statuses.includes(429) && upstreams.every((u) => u.stats().served > 0)
        },
        (spent) => spent,
        5,
        0,
      )
      if (!taught.met) throw new Error('the gateway never learned that every deployment was spent')
    },
    async freshWindow() {
      const from = window()
      const next = await pollUntil(
        async () => window(),
        (w) => w > from,
        Math.ceil(windowMs / 5) + 10,
        5,
      )
      if (!next.met) throw new Error('the upstreams never began a new window')
      // The gateway learned each reset a little after the upstream set it (the answer's trip).
      const seen = await pollUntil(learnedUntil, (until) => until.every((at) => at <= Date.now()), 200, 5)
      if (!seen.met) throw new Error(`the gateway still holds a figure of the last window: ${seen.value.join(', ')}`)
      return next.value
    },
    call: async (i) => (await post(`${gateway.url}/v2/chat/completions`, key, chat(i))).status,
    async queued(i) {
      const res = await post(`${gateway.url}/queue/chat/completions`, key, chat(i))
      return { status: res.status, endedAt: Date.now() }
    },
    async stop() {
      await gateway.stop()
      await Promise.all(upstreams.map((u) => u.close()))
    },
  }
}
