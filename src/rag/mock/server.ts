// The built-in mock RAG backend: all seven services of the RAG gateway, deterministic,
// every answer marked as a mock. It serves either one service at its root (a separate
// process standing in for one real service) or all of them under /<service>/ (what the
// gateway starts in-process when a service's baseUrl is `mock`).
import type { IncomingMessage, ServerResponse } from 'node:http'
import { listenMock, type MockListener } from './listener.ts'
import { serveDocs } from './docs.ts'
import { createConfigService, createUserService } from './directory.ts'
import { createFileService } from './files.ts'
import { createIngestService } from './ingest.ts'
import { paceOf } from './progress.ts'
import { createQueryService } from './query.ts'
import { detail, reply, type MockExchange } from './reply.ts'
import { createSessionService } from './sessions.ts'

export interface RagMockOptions {
  /** Serve this one service at the root; unset: every service under /<service>/. */
  readonly service?: string
  /** Pause between streamed answer tokens. */
  readonly tokenDelayMs?: number
  /** Uploaded files larger than this are answered file_too_large. */
  readonly maxFileBytes?: number
  /**
   * Time between the states of an upload (pending → uploaded) and of an ingestion task
   * (queued → ingesting → ingested); 0: the final state at once.
   */
  readonly statusStepMs?: number
}

/** The default pace of upload and ingestion states: a client sees them move, and waits little. */
export const DEFAULT_STATUS_STEP_MS = 250

/** A request as the mock received it: what a test checks the gateway sent. */
export interface SeenRequest {
  readonly method: string
  /** The request target exactly as it arrived. */
  readonly url: string
  readonly headers: Readonly<Record<string, string | string[] | undefined>>
}

export interface RagMock {
  handle(req: IncomingMessage, res: ServerResponse): void
  seen(): readonly SeenRequest[]
}

type ServiceHandler = (x: MockExchange) => Promise<boolean>

export function createRagMock(options: RagMockOptions = {}): RagMock {
  const pace = paceOf(options.statusStepMs ?? DEFAULT_STATUS_STEP_MS)
  const handlers = new Map<string, ServiceHandler>([
    ['config-manager', createConfigService()],
    ['user-manager', createUserService()],
    ['file-manager', createFileService({ maxFileBytes: options.maxFileBytes ?? 50 * 1024 * 1024 }, pace)],
    ['ingest-master', createIngestService(pace)],
    ['chat-session-manager', createSessionService()],
    ['query-pipeline', createQueryService(options.tokenDelayMs ?? 20)],
  ])
  const seen: SeenRequest[] = []

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/'
    const queryAt = url.indexOf('?')
    let path = queryAt === -1 ? url : url.slice(0, queryAt)
    const query = new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1))
    if (path === '/__mock/requests' && req.method === 'GET') {
      const body = JSON.stringify(seen)
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
      res.end(body)
      return
    }
    seen.push({ method: req.method ?? 'GET', url, headers: { ...req.headers } })
    if (seen.length > 10_000) seen.splice(0, seen.length - 10_000)
    let service = options.service
    if (service === undefined) {
      const segment = /^\/([^/]+)(\/.*)?$/.exec(path)
      service = segment?.[1]
      path = segment?.[2] ?? '/'
    }
    const x: MockExchange = { req, res, service: service ?? '', path, query }
    const handler = service === undefined ? undefined : handlers.get(service)
    if (handler === undefined) return detail(x, 404, 'Not Found')
    if (serveDocs(x)) return
    if (path === '/api/v1/echo' || path.startsWith('/api/v1/echo/')) return echo(x)
    if (!(await handler(x))) detail(x, 404, 'Not Found')
  }

  return {
    seen: () => seen,
    handle(req, res) {
      route(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ detail: 'Internal Server Error (mock)' }))
      })
    },
  }
}

/** Any method: what arrived (method, target, headers, body size), the body read and dropped. */
async function echo(x: MockExchange): Promise<void> {
  let bytes = 0
  for await (const chunk of x.req) bytes += (chunk as Buffer).length
  reply(x, 200, {
    method: x.req.method,
    url: x.req.url,
    path: x.path,
    query: Object.fromEntries(x.query),
    headers: x.req.headers,
    received_bytes: bytes,
  })
}

export interface RunningRagMock extends MockListener {
  readonly mock: RagMock
}

/** Listens on host:port (0: any free port). */
export async function startRagMock(
  options: RagMockOptions = {},
  port = 0,
  host = '127.0.0.1',
): Promise<RunningRagMock> {
  const mock = createRagMock(options)
  return { ...(await listenMock(mock.handle, port, host)), mock }
}
