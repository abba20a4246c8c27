// A gateway in this process (startGateway) with events and webhooks set for tests: loopback
// allowed as a webhook address (unless a test says otherwise), retries 50× faster than the
// defaults (100 ms doubling to 800 ms instead of 5 s to 4 h), sweeps and expiry scans every
// 200 ms, a login throttle that blocks on the third failure, and one model whose deployment
// takes one request a minute (to saturate it). On the embedded store or the shared Redis.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import OpenAI from 'openai'
import type { Test } from 'tap'
import { buildConfig } from '../../src/config/load.ts'
import { startGateway, type Gateway } from '../../src/main.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { defaultConfigDoc } from '../helpers/gateway.ts'
import { createRedisClient, whenReady } from '../../src/store/redis-client.ts'
import { deleteUnder, REDIS_URL } from '../helpers/redis.ts'

const ROOT = resolve(import.meta.dirname, '../..')
export const ADMIN_TOKEN = 'adm_webhooks_test_token_0123456789abcdef'
/** Its one deployment takes one request a minute: the second call finds it full. */
export const SATURATED_MODEL = 'Llama-3.3-70B-Instruct'

export type StoreKind = 'embedded' | 'redis'

/** The configuration tweaks of these tests, for an in-process gateway or a process (test/helpers/gateway.ts). */
export function webhookTestConfig(doc: Record<string, unknown>, allow: readonly string[] = ['127.0.0.1']): void {
  doc.webhooks = {
    allowAddresses: [...allow],
    retry: { baseDelayMs: 100, maxDelayMs: 800, maxAttempts: 100 },
    sweepIntervalMs: 200,
    expiryScanIntervalMs: 200,
    keyExpiringWithinDays: 3,
  }
  doc.auth = { maxFailures: 1_000_000 }
  const ragAuth = (doc.ragAuth ?? {}) as Record<string, unknown>
  ragAuth.loginThrottle = { maxFailuresPerUserAddress: 2, maxFailuresPerAddress: 100, slowdownMs: 0 }
  doc.ragAuth = ragAuth
  const models = doc.models as Array<Record<string, unknown>>
  const saturated = models.find((m) => m.name === SATURATED_MODEL)
  if (saturated === undefined) throw new Error(`no ${SATURATED_MODEL} in the default config`)
  saturated.deployments = [{ backend: 'mock', rpm: 1 }]
  const backends = doc.backends as Record<string, Record<string, unknown>>
  if (backends.mock) Object.assign(backends.mock, { tokensPerSecond: 2000 })
}

export interface EventsGateway {
  readonly gateway: Gateway
  readonly url: string
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }>
  sdk(key: string): OpenAI
}

export async function startEventsGateway(
  t: Test,
  store: StoreKind,
  options: { readonly allow?: readonly string[]; readonly prefix?: string } = {},
): Promise<EventsGateway> {
  const doc = defaultConfigDoc()
  webhookTestConfig(doc, options.allow)
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-wh-e2e-'))
  const env: Record<string, string> = {
    TOLLGATE_DATA_DIR: dataDir,
    PORT: '0',
    METRICS_PORT: '0',
    TOLLGATE_ADMIN_TOKEN: ADMIN_TOKEN,
  }
  let cleanup = async (): Promise<void> => undefined
  if (store === 'redis') {
    const prefix = options.prefix ?? `tgtest:wh-e2e:${randomBytes(6).toString('hex')}:`
    env.REDIS_URL = REDIS_URL
    env.TOLLGATE_KEY_SECRET = `wh-test-${randomBytes(16).toString('hex')}`
    doc.store = { ...((doc.store ?? {}) as Record<string, unknown>), keyPrefix: prefix }
    // Made now: a client made in the teardown would not be connected yet (no offline queue).
    const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-wh-e2e' })
    cleanup = async () => {
      await whenReady(redis)
      await deleteUnder(redis, prefix)
      redis.disconnect()
    }
  }
  const config = buildConfig(doc, join(ROOT, 'config/default.yaml'), env)
  const gateway = await startGateway(config, createLogger('silent'))
  t.teardown(async () => {
    await gateway.shutdown()
    await cleanup()
    rmSync(dataDir, { recursive: true, force: true })
  })
  return {
    gateway,
    url: gateway.url,
    async admin(method, path, body) {
      const res = await fetch(`${gateway.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${ADMIN_TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      return { status: res.status, json: (text === '' ? {} : JSON.parse(text)) as Record<string, unknown> }
    },
    sdk: (key) => new OpenAI({ apiKey: key, baseURL: `${gateway.url}/v2`, maxRetries: 0 }),
  }
}
