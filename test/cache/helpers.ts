// A gateway with the response cache on for the Standard4000 tier, on either store.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parse } from 'yaml'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'

const ROOT = resolve(import.meta.dirname, '../..')

export type StoreKind = 'embedded' | 'redis'

export interface CacheGatewayOptions {
  readonly store: StoreKind
  /** The Redis prefix (redis only); a restart reuses it with the same secret. */
  readonly redis?: StartOptions
  readonly cache?: Record<string, unknown>
  readonly responseCache?: Record<string, unknown>
  readonly dataDir?: string
}

export function cachedPlans(cache: Record<string, unknown> = {}): Record<string, unknown> {
  const plans = parse(readFileSync(join(ROOT, 'config/plans.yaml'), 'utf8')) as {
    tiers: Record<string, Record<string, unknown>>
  }
  const tier = plans.tiers.Standard4000
  if (tier === undefined) throw new Error('no Standard4000 tier')
  tier.cache = { enabled: true, ttlSeconds: 600, ...cache }
  return plans
}

export async function startCacheGateway(options: CacheGatewayOptions): Promise<RunningTollgate> {
  const base = options.store === 'redis' ? (options.redis ?? {}) : {}
  return startTollgate({
    ...base,
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
    config: (doc) => {
      base.config?.(doc)
      doc.plans = cachedPlans(options.cache)
      if (options.responseCache !== undefined) doc.responseCache = options.responseCache
    },
  })
}

export { onSharedRedis }

export async function admin(gw: RunningTollgate, method: string, path: string): Promise<unknown> {
  const res = await fetch(`${gw.url}${path}`, { method, headers: { authorization: `Bearer ${gw.adminToken}` } })
  if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
  return res.json()
}

/** An admin change (POST, PUT …) with a JSON body; throws unless it succeeded. */
export async function adminSend(gw: RunningTollgate, method: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
}

/** The sum of a series' samples whose line includes `part` (a label). */
export async function metric(gw: RunningTollgate, name: string, part = ''): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  return text
    .split('\n')
    .filter((l) => (l.startsWith(`${name} `) || l.startsWith(`${name}{`)) && l.includes(part))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0)
}
