// A loopback TCP proxy in front of Redis that, once armed, holds back the first EVALSHA of
// a given script and everything its connection sends after it: that command never reaches
// Redis. A test widens a window that is milliseconds wide in production (a stored request
// metered, its result not yet recorded) to as long as it likes, and kills the gateway in it.
import net from 'node:net'

export interface HoldingProxy {
  readonly port: number
  /** From now on, the first EVALSHA of `sha` is held (with what follows it on its connection). */
  arm(sha: string): void
  /** Resolves once a command was held. */
  readonly held: Promise<void>
  close(): Promise<void>
}

/** The RESP head of an EVALSHA just before its sha (ioredis: `*<n>\r\n$7\r\nevalsha\r\n$40\r\n`). */
const HEAD = /\*\d+\r\n\$7\r\nevalsha\r\n\$40\r\n$/i
/** Bytes of a connection kept to find a command split over two reads. */
const TAIL = 64

export async function startHoldingProxy(targetHost: string, targetPort: number): Promise<HoldingProxy> {
  const sockets = new Set<net.Socket>()
  let sha: Buffer | null = null
  let onHeld: () => void = () => {}
  const held = new Promise<void>((resolve) => (onHeld = resolve))
  let holding = false
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, targetHost)
    sockets.add(client).add(upstream)
    const drop = (): void => {
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop).on('close', drop)
    upstream.on('error', drop).on('close', drop)
    upstream.pipe(client)
    let tail = Buffer.alloc(0)
    let stopped = false
    client.on('data', (chunk: Buffer) => {
      if (stopped) return
      const seen = Buffer.concat([tail, chunk])
      const at = sha === null || holding ? -1 : seen.indexOf(sha)
      if (at === -1 || !HEAD.test(seen.subarray(Math.max(0, at - 40), at).toString('latin1'))) {
        upstream.write(chunk)
        tail = seen.subarray(Math.max(0, seen.length - TAIL))
        return
      }
      // What comes before the command goes on; the command and the rest of the connection never do.
      const head =
        seen
          .subarray(Math.max(0, at - 40), at)
          .toString('latin1')
          .match(HEAD)?.[0].length ?? 0
      const start = at - head - tail.length
      if (start > 0) upstream.write(chunk.subarray(0, start))
      stopped = true
      holding = true
      onHeld()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('proxy has no port')
  return {
    port: address.port,
    arm(hex) {
      sha = Buffer.from(hex, 'latin1')
    },
    held,
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
