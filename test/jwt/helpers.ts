// Raw HTTP for the RAG gateway's login endpoints, JWT pieces for forging tokens, and the
// gateway the login tests run against (embedded, or on a shared Redis namespace).
import type { Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { REDIS_URL } from '../keys/redis-namespace.ts'

export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  readonly json: Record<string, unknown>
}

export async function call(
  url: string,
  method: string,
  path: string,
  options: { body?: unknown; token?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const res = await fetch(`${url}${path}`, {
    method,
    signal: AbortSignal.timeout(60_000),
    headers: {
      ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    ...(options.body === undefined
      ? {}
      : { body: typeof options.body === 'string' ? options.body : JSON.stringify(options.body) }),
  }).catch((err: unknown) => {
    // Which socket error it was: fetch's own message is only "fetch failed".
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    throw new Error(`${method} ${path}: ${(err as Error).message} (${cause?.code ?? cause?.message ?? 'no cause'})`, {
      cause: err,
    })
  })
  const text = await res.text()
  let json: Record<string, unknown> = {}
  try {
    json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>)
  } catch {
    /* not JSON: the test looks at text */
  }
  return { status: res.status, headers: res.headers, text, json }
}

export interface Pair {
  readonly access_token: string
  readonly refresh_token: string
  readonly expires_in: number
  readonly token_type: string
}

export async function login(
  url: string,
  username: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<Pair> {
  const reply = await call(url, 'POST', '/api/v1/auth/user', { body: { username, password }, headers })
  if (reply.status !== 200) throw new Error(`login ${username}: ${reply.status} ${reply.text}`)
  return reply.json as unknown as Pair
}

export async function createUser(
  gw: Pick<RunningTollgate, 'url' | 'adminToken'>,
  body: Record<string, unknown>,
): Promise<{ id: string; username: string }> {
  const reply = await call(gw.url, 'POST', '/admin/users', { body, token: gw.adminToken })
  if (reply.status !== 201) throw new Error(`create user: ${reply.status} ${reply.text}`)
  return reply.json as { id: string; username: string }
}

export const me = (url: string, token: string): Promise<Reply> => call(url, 'GET', '/api/v1/auth/me', { token })

export const b64url = (value: unknown): string =>
  Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')

export function decodePart(token: string, index: 0 | 1): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[index] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>
}

/** Polls `check` every 50 ms until it is true; resolves with the milliseconds it took, or -1 after `limitMs`. */
export async function within(limitMs: number, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now()
  while (performance.now() - start < limitMs) {
    if (await check()) return performance.now() - start
    await new Promise((done) => setTimeout(done, 50))
  }
  return -1
}

/** Where a gateway keeps its state on Redis: gateways given the same prefix and secret share it. */
export interface SharedRedis {
  readonly prefix: string
  readonly secret: string
}

/**
 * A gateway stopped when the test ends, with `config` applied to its configuration
 * document; on the embedded store, or on Redis under `redis.prefix` when given.
 */
export async function authGateway(
  t: Test,
  options: { adminToken: string; config: (doc: Record<string, unknown>) => void; redis?: SharedRedis | undefined },
): Promise<RunningTollgate> {
  const { redis } = options
  const gw = await startTollgate({
    adminToken: options.adminToken,
    config: (doc) => {
      options.config(doc)
      if (redis !== undefined) (doc.store as Record<string, unknown>).keyPrefix = redis.prefix
    },
    env: redis === undefined ? {} : { REDIS_URL, TOLLGATE_KEY_SECRET: redis.secret },
  })
  t.teardown(async () => {
    await gw.stop()
  })
  return gw
}
