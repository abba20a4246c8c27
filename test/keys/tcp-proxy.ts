// A loopback TCP proxy that a test can cut and restore: a Redis "blip" for one gateway
// without touching the shared Redis itself. `onClientData` sees every byte a client sends
// through it (a test counting the commands a gateway sends to Redis).
import net from 'node:net'

export interface TcpProxy {
  readonly port: number
  /** Drops every open connection and refuses new ones until restore(). */
  cut(): void
  restore(): void
  close(): Promise<void>
}

export async function startTcpProxy(
  targetHost: string,
  targetPort: number,
  options: { onClientData?: (chunk: Buffer) => void } = {},
): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>()
  let refusing = false
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy()
      return
    }
    const upstream = net.connect(targetPort, targetHost)
    sockets.add(client)
    sockets.add(upstream)
    const drop = (): void => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    if (options.onClientData) client.on('data', options.onClientData)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    cut() {
      refusing = true
      for (const s of sockets) s.destroy()
      sockets.clear()
    },
    restore() {
      refusing = false
    },
    async close() {
      refusing = true
      for (const s of sockets) s.destroy()
      await new Promise<void>((done) => server.close(() => done()))
    },
  }
}
