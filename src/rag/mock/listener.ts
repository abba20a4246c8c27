// The mock RAG backend's listener, apart from its services (server.ts), so that the
// gateway can listen without loading them (lazy.ts).
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { http } from '../../http/node-http.ts'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface MockListener {
  readonly url: string
  /** Its TCP port; 0 on a Unix socket. */
  readonly port: number
  /** The Unix socket it listens on, when it has no port (the gateway's own mock). */
  readonly socketPath?: string
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

/**
 * Listens on a Unix socket of its own, in a directory only this user can enter: the
 * gateway's mock takes no port (operators count on PORT and METRICS_PORT alone) and no
 * other local user can reach it. Its URL names no real host: the gateway's agent for it
 * connects to `socketPath`.
 */
export async function listenMockSocket(handle: Handle): Promise<MockListener> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-rag-mock-'))
  const socketPath = join(dir, 'mock.sock')
  const server: Server = http.createServer({ keepAliveTimeout: 65_000 }, handle)
  try {
    await new Promise<void>((done, fail) => {
      server.once('error', fail)
      server.listen(socketPath, () => done())
    })
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  return {
    url: 'http://rag-mock',
    port: 0,
    socketPath,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections()
        server.close(() => {
          rmSync(dir, { recursive: true, force: true })
          done()
        })
      }),
  }
}
