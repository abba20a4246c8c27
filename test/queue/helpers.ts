// Shared by the /queue end-to-end tests: gateways (embedded, or several on one Redis under
// a random prefix deleted at the end), raw calls with and without Prefer: respond-async,
// and polling a stored request until it is done.
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import { startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { request, type RawResponse } from '../helpers/http.ts'
import { REDIS_URL, redisMissing, redisNamespace, type RedisNamespace } from '../keys/redis-namespace.ts'

export const MODEL = 'Mistral-Small-24B-Instruct-2501'

export interface GatewaySettings {
  readonly windowMs?: number
  readonly queue?: Record<string, unknown>
  readonly config?: (doc: Record<string, unknown>) => void
  readonly env?: Record<string, string>
  readonly dataDir?: string
}

function configure(settings: GatewaySettings, prefix?: string): (doc: Record<string, unknown>) => void {
  return (doc) => {
    if (settings.windowMs !== undefined) doc.limits = { windowMs: settings.windowMs }
    // Several shards (a cluster's layout) on the one test Redis: the tests see the sharded queue.
    doc.queue = {
      retryBackoffMs: 50,
      sweepIntervalMs: 1000,
      ...(prefix === undefined ? {} : { shards: 4 }),
      ...settings.queue,
    }
    // A loaded test machine can stall Redis replies past the default deadline: such a stall
    // is an outage to the gateway, which is not what these tests are about.
    if (prefix !== undefined)
      Object.assign(doc.store as Record<string, unknown>, { keyPrefix: prefix, commandTimeoutMs: 3000 })
    settings.config?.(doc)
  }
}

/** One embedded gateway, stopped when the test ends. */
export async function embeddedGateway(t: Test, settings: GatewaySettings = {}): Promise<RunningTollgate> {
  const options: StartOptions = {
    config: configure(settings),
    ...(settings.env ? { env: settings.env } : {}),
    ...(settings.dataDir ? { dataDir: settings.dataDir } : {}),
  }
  const gw = await startTollgate(options)
  t.teardown(() => gw.stop())
  return gw
}

export interface Cluster {
  readonly ns: RedisNamespace
  readonly adminToken: string
  /** Starts one more gateway on the shared Redis; stopped when the test ends. */
  start(settings?: GatewaySettings): Promise<RunningTollgate>
}

/** A Redis namespace for gateways sharing keys, limits and the queue. Fails (never skips) without Redis. */
export async function cluster(t: Test): Promise<Cluster> {
  const ns = await redisNamespace(t)
  if (!ns.up) throw new Error(redisMissing())
  const adminToken = `adm_${randomBytes(16).toString('hex')}`
  const secret = `queue-secret-${randomBytes(16).toString('hex')}`
  return {
    ns,
    adminToken,
    async start(settings = {}) {
      const gw = await startTollgate({
        adminToken,
        config: configure(settings, ns.prefix),
        env: { REDIS_URL, TOLLGATE_KEY_SECRET: secret, ...settings.env },
      })
      t.teardown(() => gw.stop())
      return gw
    },
  }
}

export const chatBody = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content }],
  max_tokens: 5,
  ...extra,
})

export function post(
  url: string,
  key: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<RawResponse> {
  return request(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  })
}

export const ASYNC = { prefer: 'respond-async' }

export function get(url: string, key: string): Promise<RawResponse> {
  return request(url, { headers: { authorization: `Bearer ${key}` } })
}

export function del(url: string, key: string): Promise<RawResponse> {
  return request(url, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })
}

export interface QueueView {
  id: string
  object: string
  status: string
  created_at: number
  endpoint: string
  model: string
  position?: number | null
  attempts: number
  started_at: number | null
  completed_at: number | null
  response?: {
    status_code: number
    body: unknown
    usage: { input_tokens: number; output_tokens: number; total_tokens: number }
    content_type?: string
    body_encoding?: string
  }
}

/** Polls a stored request until its status is one of `statuses` (bounded). */
export async function until(url: string, key: string, statuses: readonly string[], ms = 20_000): Promise<QueueView> {
  const deadline = Date.now() + ms
  let last: QueueView | undefined
  while (Date.now() < deadline) {
    const res = await get(url, key)
    last = res.json<QueueView>()
    if (statuses.includes(last.status)) return last
    await new Promise((done) => setTimeout(done, 50))
  }
  throw new Error(`still ${last?.status ?? 'unknown'} after ${ms} ms: ${JSON.stringify(last)}`)
}

/** A response body with the fields that differ between two runs of the same call masked. */
export function masked(body: unknown): unknown {
  if (typeof body !== 'object' || body === null) return body
  const { id: _id, created: _created, ...rest } = body as Record<string, unknown>
  return rest
}

export const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms))
