// A small client of the admin API for the command line: one request, JSON in and out,
// errors turned into messages a person can act on. The admin token is sent, never printed.

export class AdminApiError extends Error {
  override readonly name = 'AdminApiError'
  readonly status: number
  readonly code: string | null
  constructor(status: number, code: string | null, message: string) {
    super(message)
    this.status = status
    this.code = code
  }
}

export interface AdminClientOptions {
  readonly url: string
  readonly token: string
  readonly fetch?: typeof fetch
  readonly timeoutMs?: number
}

export type AdminClient = (
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
) => Promise<unknown>

export function createAdminClient(options: AdminClientOptions): AdminClient {
  const base = options.url.replace(/\/+$/, '')
  const doFetch = options.fetch ?? fetch
  const timeoutMs = options.timeoutMs ?? 30_000
  return async (method, path, body) => {
    let res: Response
    try {
      res = await doFetch(`${base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${options.token}`,
          accept: 'application/json',
          // The audit log records the CLI's changes as made through it (audit/audited-routes.ts).
          'x-tollgate-client': 'cli',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      })
    } catch (err) {
      const cause =
        err instanceof Error && err.cause instanceof Error
          ? err.cause.message
          : err instanceof Error
            ? err.message
            : String(err)
      throw new AdminApiError(
        0,
        null,
        `cannot reach the gateway at ${base}: ${cause}. Is it running? Name another one with --url or TOLLGATE_URL, or set TOLLGATE_DATA_DIR to the data directory it was started on.`,
      )
    }
    const text = await res.text()
    let json: unknown
    try {
      json = text === '' ? null : JSON.parse(text)
    } catch {
      throw new AdminApiError(res.status, null, `the gateway answered ${res.status} with a body that is not JSON`)
    }
    if (!res.ok) {
      const error = typeof json === 'object' && json !== null && 'error' in json ? json.error : undefined
      const message =
        typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string'
          ? error.message
          : `HTTP ${res.status}`
      const code =
        typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
          ? error.code
          : null
      throw new AdminApiError(res.status, code, message)
    }
    return json
  }
}
