// The mock RAG backend as the gateway starts it when a service's baseUrl is `mock`: the
// listener (a Unix socket, not a port) at boot (the relay targets need its address), the services (directory, files,
// ingestion, sessions, query: several MB of code and state) loaded by its first request, so
// a gateway whose RAG services nobody calls does not hold them.
import { listenMockSocket, type Handle, type MockListener } from './listener.ts'
import type { RagMock, RagMockOptions } from './server.ts'

/** The mock on a Unix socket of its own (no port), its services loaded by the first request. */
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
  return listenMockSocket(handle)
}
