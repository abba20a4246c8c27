// The mock RAG backend's listener, apart from its services: the gateway starts it at boot
// when a service's baseUrl is `mock` (the relay targets need its address), and loads the
// services (directory, files, ingestion, sessions, query: several MB of code and state) on
// its first request, so a gateway whose RAG services nobody calls does not hold them.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RagMock, RagMockOptions } from './server.ts'

export interface MockListener {
  readonly url: string
  readonly port: number
  close(): Promise<void>
}

type Handle = (req: IncomingMessage, res: ServerResponse) => void

/** Listens on host:port (0: any free port) with `handle`. */
export async function listenMock(handle: Handle, port: number, host: string): Promise<MockListener> {
  const server: Server = createServer({ keepAliveTimeout: 65_000 }, handle)
  await new Promise<void>((done, fail) => {
    server.once('error', fail)
    server.listen(port, host, () => done())
  })
  const bound = (server.address() as AddressInfo).port
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections()
        server.close(() => done())
      }),
  }
}

/** The mock on a free loopback port, its services loaded by the first request. */
export function startLazyRagMock(options: RagMockOptions): Promise<MockListener> {
  let mock: Promise<RagMock> | undefined
  const handle: Handle = (req, res) => {
    mock ??= import('./server.ts').then((m) => m.createRagMock(options))
    mock.then(
      (loaded) => loaded.handle(req, res),
      () => {
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ detail: 'Internal Server Error (mock)' }))
      },
    )
  }
  return listenMock(handle, 0, '127.0.0.1')
}
