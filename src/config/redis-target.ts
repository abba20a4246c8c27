// Which Redis the gateway's shared state lives on, in one of the three shapes Redis is
// run in: one server (a URL), a Redis Cluster (seed nodes), or a master watched by
// Sentinel (sentinels plus the master's name). Built once at boot from the store section
// and the environment; every part that opens a Redis connection takes it from here.
import type { RawConfig } from './schema.ts'

export interface HostPort {
  readonly host: string
  readonly port: number
}

/** ACL user and password; from the environment only, never from the file. */
export interface RedisAuth {
  readonly username?: string
  readonly password?: string
}

export type RedisTarget =
  | { readonly kind: 'standalone'; readonly url: string }
  | { readonly kind: 'cluster'; readonly nodes: readonly HostPort[]; readonly tls: boolean; readonly auth: RedisAuth }
  | {
      readonly kind: 'sentinel'
      readonly sentinels: readonly HostPort[]
      readonly masterName: string
      /** TLS to the master and its replicas. */
      readonly tls: boolean
      /** TLS to the sentinels themselves. */
      readonly sentinelTls: boolean
      readonly auth: RedisAuth
      readonly sentinelAuth: RedisAuth
    }

/** host:port, or [v6 address]:port. */
export const HOST_PORT = /^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]/]+):(\d{1,5})$/

export function parseHostPort(text: string): HostPort {
  const match = HOST_PORT.exec(text.trim())
  const port = Number(match?.[2])
  if (!match || !(port > 0 && port < 65536)) throw new RangeError(`"${text}" is not host:port`)
  const host = match[1] ?? ''
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port }
}

/** The credentials of a data node or a sentinel; undefined parts are left out. */
function auth(username: string | undefined, password: string | undefined): RedisAuth {
  return { ...(username ? { username } : {}), ...(password ? { password } : {}) }
}

export interface RedisSecrets {
  readonly username: string | undefined
  readonly password: string | undefined
  readonly sentinelUsername: string | undefined
  readonly sentinelPassword: string | undefined
}

/** The topology the store section names, or undefined for the embedded store. */
export function redisTargetOf(store: RawConfig['store'], secrets: RedisSecrets): RedisTarget | undefined {
  if (store.redisUrl !== undefined) return { kind: 'standalone', url: store.redisUrl }
  const data = auth(secrets.username, secrets.password)
  if (store.redisCluster !== undefined) {
    return {
      kind: 'cluster',
      nodes: store.redisCluster.nodes.map(parseHostPort),
      tls: store.redisCluster.tls,
      auth: data,
    }
  }
  if (store.redisSentinel !== undefined) {
    const s = store.redisSentinel
    return {
      kind: 'sentinel',
      sentinels: s.sentinels.map(parseHostPort),
      masterName: s.masterName,
      tls: s.tls,
      sentinelTls: s.sentinelTls,
      auth: data,
      sentinelAuth: auth(secrets.sentinelUsername, secrets.sentinelPassword),
    }
  }
  return undefined
}

/** For logs and messages: where, never with whom (a URL's password is masked). */
export function describeRedisTarget(target: RedisTarget): string {
  const list = (nodes: readonly HostPort[]): string =>
    nodes.map((n) => (n.host.includes(':') ? `[${n.host}]:${n.port}` : `${n.host}:${n.port}`)).join(',')
  switch (target.kind) {
    case 'standalone': {
      try {
        const url = new URL(target.url)
        if (url.password) url.password = '***'
        // An ACL user name says whom too.
        if (url.username) url.username = '***'
        return url.toString()
      } catch {
        return 'redis (unparsable URL)'
      }
    }
    case 'cluster':
      return `redis cluster ${list(target.nodes)}${target.tls ? ' (tls)' : ''}`
    case 'sentinel':
      return `redis sentinel ${target.masterName}@${list(target.sentinels)}${target.tls ? ' (tls)' : ''}`
  }
}
