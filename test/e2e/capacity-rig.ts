// The rig of the capacity end-to-end tests (issue #22's "Done means"): test upstreams that
// keep their own quota the way Azure does (test/helpers/quota-upstream.ts), one model whose
// deployments are those upstreams, and several real `tollgate serve` processes on one
// Redis under a prefix of their own, so every instance shares one picture of the
// deployments. One key with limits far above anything sent: the upstreams, not the key's
// plan, are the bottleneck.
import OpenAI from 'openai'
import type { Test } from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { startQuotaUpstream, type QuotaUpstream, type QuotaUpstreamOptions } from '../helpers/quota-upstream.ts'
import { cluster, type Cluster } from '../queue/helpers.ts'

export const CAP_MODEL = 'capacity-model'

/** The key's own limits: far above what the tests send, so only the upstreams refuse. */
export const KEY_RPM = 1_000_000

export interface DeploymentSpec {
  /** The backend's name (and so the deployment's capacity id: `<name>/<CAP_MODEL>`). */
  readonly name: string
  readonly upstream: QuotaUpstreamOptions
  /** What the deployment declares in the config (rpm, tpm, maxConcurrent), as an operator would. */
  readonly declare?: { readonly rpm?: number; readonly tpm?: number; readonly maxConcurrent?: number }
}

export interface CapacityRig {
  readonly cluster: Cluster
  readonly gateways: readonly RunningTollgate[]
  readonly upstreams: Readonly<Record<string, QuotaUpstream>>
  /** Creates a key with limits far above the load (through the first gateway). */
  key(): Promise<{ key: string; id: string }>
}

export interface RigOptions {
  readonly deployments: readonly DeploymentSpec[]
  readonly instances?: number
  readonly queue?: Record<string, unknown>
}

export async function capacityRig(t: Test, options: RigOptions): Promise<CapacityRig> {
  const upstreams: Record<string, QuotaUpstream> = {}
  for (const d of options.deployments) {
    const upstream = await startQuotaUpstream(d.upstream)
    t.teardown(() => upstream.close())
    upstreams[d.name] = upstream
  }
  const c = await cluster(t)
  const config = (doc: Record<string, unknown>): void => {
    const backends = doc.backends as Record<string, unknown>
    for (const d of options.deployments) backends[d.name] = { type: 'openai', baseUrl: upstreams[d.name]?.url }
    ;(doc.models as unknown[]).push({
      name: CAP_MODEL,
      kind: 'chat',
      deployments: options.deployments.map((d) => ({ backend: d.name, ...d.declare })),
    })
  }
  // One at a time: three boots at once on a loaded 2-core machine can miss the start deadline.
  const gateways: RunningTollgate[] = []
  for (let i = 0; i < (options.instances ?? 3); i++)
    gateways.push(await c.start({ config, ...(options.queue ? { queue: options.queue } : {}) }))
  const first = gateways[0]
  if (first === undefined) throw new Error('a rig needs at least one gateway')
  return {
    cluster: c,
    gateways,
    upstreams,
    key: () =>
      first.createKey({
        tier: 'Standard4000',
        limits: { '*': { rpm: KEY_RPM, input_tpm: 100_000_000, output_tpm: 100_000_000 } },
      }),
  }
}

export const chat = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: CAP_MODEL,
  messages: [{ role: 'user', content }],
  max_tokens: 5,
  ...extra,
})

/** One exchange as a client saw it. */
export interface Exchange {
  readonly status: number
  readonly headers: Headers
  readonly body: string
  readonly ms: number
}

/** An OpenAI SDK client on one gateway that records every exchange it makes (retries included). */
export function recordingClient(
  gw: RunningTollgate,
  key: string,
  options: { readonly maxRetries?: number; readonly path?: string } = {},
): { readonly sdk: OpenAI; readonly exchanges: Exchange[] } {
  const exchanges: Exchange[] = []
  const sdk = new OpenAI({
    apiKey: key,
    baseURL: `${gw.url}${options.path ?? '/v2'}`,
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
    fetch: async (url, init) => {
      const started = Date.now()
      const res = await fetch(url, init)
      if (res.status === 200) {
        exchanges.push({ status: 200, headers: res.headers, body: '', ms: Date.now() - started })
        return res
      }
      // Error bodies are small: read here, handed on whole.
      const body = await res.text()
      exchanges.push({ status: res.status, headers: res.headers, body, ms: Date.now() - started })
      return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
    },
  })
  return { sdk, exchanges }
}

/** Whether a body is the upstream's own refusal (quota-upstream's Azure text), which no client should see. */
export const upstreamRefusalIn = (body: string): boolean =>
  body.includes('ChatCompletions_Create') || body.includes('"code":"429"')

/** The gateway's 429 error object, or null. */
export function gatewayRefusal(body: string): { type?: string; code?: string; message?: string } | null {
  try {
    const parsed = JSON.parse(body) as { error?: { type?: string; code?: string; message?: string } }
    return parsed.error ?? null
  } catch {
    return null
  }
}

/**
 * Runs `send(i)` for i in [0, count) at `perSecond` calls a second, open loop (the next call
 * does not wait for the last one to answer), and resolves with every result. The pacing is
 * the load's shape, not a wait for a condition.
 */
export async function paced<T>(count: number, perSecond: number, send: (i: number) => Promise<T>): Promise<T[]> {
  const started = Date.now()
  const calls: Array<Promise<T>> = []
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / perSecond
    const wait = due - Date.now()
    if (wait > 0) await new Promise((go) => setTimeout(go, wait))
    calls.push(send(i))
  }
  return Promise.all(calls)
}
