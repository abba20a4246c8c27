// Many keep-alive connections to a gateway, each having made one request and now idle:
// the idle-connection test and benchmark hold them open and measure the gateway.
import { connect, type Socket } from 'node:net'
import { ResponseReader } from './http-reader.ts'

export interface IdleConnections {
  /** Connections the server has not closed. */
  open(): number
  /** Sends GET /healthz on connection `i`; resolves with the status. */
  request(i: number): Promise<number | undefined>
  close(): Promise<void>
}

/** Spread over 127.0.0.<firstHost>.. so that no address holds more than `perAddress`. */
export async function openIdleConnections(
  port: number,
  count: number,
  perAddress = 500,
  firstHost = 10,
): Promise<IdleConnections> {
  const sockets: Array<{ socket: Socket; reader: ResponseReader }> = []
  const one = async (i: number): Promise<void> => {
    const socket = connect({
      port,
      host: '127.0.0.1',
      localAddress: `127.0.0.${firstHost + Math.floor(i / perAddress)}`,
    })
    const reader = new ResponseReader(socket)
    sockets[i] = { socket, reader }
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
    const res = await reader.next()
    if (res?.status !== 200)
      throw new Error(`connection ${i}: ${res?.status ?? 'closed'} ${reader.error?.message ?? ''}`)
  }
  // In batches: thousands of connects at once overflow the listen backlog.
  for (let i = 0; i < count; i += 100) {
    await Promise.all(Array.from({ length: Math.min(100, count - i) }, (_, j) => one(i + j)))
  }
  return {
    open: () => sockets.filter(({ socket }) => !socket.destroyed && !socket.readableEnded).length,
    async request(i) {
      const c = sockets[i]
      if (c === undefined) return undefined
      c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
      return (await c.reader.next())?.status
    },
    async close() {
      await Promise.all(
        sockets.map(
          ({ socket }) =>
            new Promise<void>((done) => {
              if (socket.destroyed) {
                done()
                return
              }
              socket.once('close', () => done())
              socket.destroy()
            }),
        ),
      )
    },
  }
}
