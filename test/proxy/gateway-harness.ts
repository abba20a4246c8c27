// A minimal stand-in for the gateway's listener in tests: a loopback server whose handler
// each test supplies, and a client that records exactly what came back.
import http, {
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http'
import type { AddressInfo } from 'node:net'
import type { UpstreamRequest } from '../../src/backends/port.ts'
import type { RequestBody } from '../../src/http/body.ts'

export interface Gateway {
  readonly url: string
  close(): Promise<void>
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<void>

export async function startGateway(handler: Handler): Promise<Gateway> {
  const server = http.createServer((req, res) => {
    handler(req, res).catch((err: unknown) => {
      if (!res.headersSent) {
        res.statusCode = 599
        res.end(String(err))
      } else res.destroy()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export interface CallOptions {
  readonly method?: string
  readonly path?: string
  readonly headers?: OutgoingHttpHeaders
  readonly body?: string | Buffer
}

export interface CallResult {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/** Starts a request and resolves with the response once its headers are in. */
export function open(
  url: string,
  options: CallOptions = {},
): Promise<{ req: http.ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}${options.path ?? '/'}`,
      {
        method: options.method ?? 'POST',
        headers: options.headers ?? {},
        agent: false,
      },
      (res) => resolve({ req, res }),
    )
    req.on('error', reject)
    req.end(options.body)
  })
}

/** The whole exchange; a connection cut mid-body resolves with what arrived and truncated: true. */
export async function call(url: string, options: CallOptions = {}): Promise<CallResult & { truncated: boolean }> {
  const { res } = await open(url, options)
  const chunks: Buffer[] = []
  let truncated = false
  try {
    for await (const chunk of res as AsyncIterable<Buffer>) chunks.push(chunk)
  } catch {
    truncated = true
  }
  return { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), truncated }
}

/** The gateway's side: an UpstreamRequest for this client exchange, aborted when the client leaves. */
export function upstreamRequestFor(
  req: IncomingMessage,
  res: ServerResponse,
  fields: {
    path: string
    body: RequestBody
    method?: 'GET' | 'POST' | 'DELETE'
    model?: string | null
    signal?: AbortSignal
  },
): UpstreamRequest {
  const controller = new AbortController()
  res.on('close', () => {
    if (!res.writableFinished) controller.abort()
  })
  return {
    endpoint: 'chat.completions',
    method: fields.method ?? 'POST',
    path: fields.path,
    model: fields.model ?? null,
    body: fields.body,
    requestId: 'req_test123',
    signal: fields.signal ?? controller.signal,
    client: { req, res },
  }
}

/** Parses the `data:` payloads of an SSE body. */
export function dataOf(sse: string): string[] {
  return sse.split(/\r?\n\r?\n/).flatMap((event) => {
    const lines = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart())
    return lines.length > 0 ? [lines.join('\n')] : []
  })
}
