// The mock RAG backend's listener, apart from its services (server.ts), so that the
// gateway can listen without loading them (lazy.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { http } from '../../http/node-http.ts'
import type { AddressInfo } from 'node:net'

export interface MockListener {
  readonly url: string
  readonly port: number
  close(): Promise<void>
}

export type Handle = (req: IncomingMessage, res: ServerResponse) => void

/** Listens on host:port (0: any free port) with `handle`. */
export async function listenMock(handle: Handle, port: number, host: string): Promise<MockListener> {
  const server: Server = http.createServer({ keepAliveTimeout: 65_000 }, handle)
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
