// Where the admin commands find the gateway and its admin token, the same for every one of
// them: the flags first, then TOLLGATE_URL and TOLLGATE_ADMIN_TOKEN, then what the gateway
// itself would read in this environment. For an embedded gateway that is its data directory
// (TOLLGATE_DATA_DIR): the address the running gateway recorded there (so `serve --port` is
// found too) and the admin token it keeps there, the one `tollgate admin-token` prints;
// else its configuration (TOLLGATE_CONFIG, HOST, PORT) for the address.
import { resolve } from 'node:path'
import { adminTokenPath, readStoredAdminToken } from '../auth/admin-token.ts'
import { loadConfig } from '../config/load.ts'
import type { Config } from '../config/schema.ts'
import { gatewayUrlOf } from '../store/data-dir-lock.ts'

export interface GatewayTarget {
  readonly url: string
  /** Undefined when nothing names one; `missing` says where one was looked for. */
  readonly token: string | undefined
  readonly missing: string
}

type Env = Readonly<Record<string, string | undefined>>

/** The gateway named by the flags, else by the environment, else where the gateway would listen. */
export function gatewayTarget(flags: { url?: string; token?: string }, env: Env): GatewayTarget {
  // The configuration is read only when the flags and TOLLGATE_* leave something open, and a
  // file that does not load (a remote gateway's, say) leaves the defaults.
  let config: Config | null | undefined
  const gatewayConfig = (): Config | null => {
    if (config === undefined) {
      try {
        config = loadConfig({ env })
      } catch {
        config = null
      }
    }
    return config
  }
  const url = flags.url ?? env.TOLLGATE_URL ?? recordedUrl(gatewayConfig()) ?? listenUrl(gatewayConfig(), env)
  const token = flags.token ?? env.TOLLGATE_ADMIN_TOKEN
  if (token) return { url, token, missing: '' }
  const found = gatewayConfig()
  if (found === null || found.redis !== undefined)
    return {
      url,
      token: undefined,
      missing: 'no admin token: set TOLLGATE_ADMIN_TOKEN (or pass --admin-token)',
    }
  const dataDir = resolve(found.store.dataDir)
  return {
    url,
    token: readStoredAdminToken(dataDir) ?? undefined,
    missing: `no admin token: set TOLLGATE_ADMIN_TOKEN (or pass --admin-token); none is stored in ${adminTokenPath(dataDir)} (TOLLGATE_DATA_DIR) either`,
  }
}

/** Where the embedded gateway running on this configuration's data directory said it listens. */
function recordedUrl(config: Config | null): string | undefined {
  return config === null || config.redis !== undefined ? undefined : gatewayUrlOf(resolve(config.store.dataDir))
}

/** Where a gateway started in this environment listens, as a URL this machine can call. */
function listenUrl(config: Config | null, env: Env): string {
  const host = config?.server.host ?? env.HOST ?? '127.0.0.1'
  const port = config?.server.port ?? (/^\d{1,5}$/.test(env.PORT ?? '') ? Number(env.PORT) : 8080)
  const callable = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '[::1]' : host.includes(':') ? `[${host}]` : host
  return `http://${callable}:${port}`
}
