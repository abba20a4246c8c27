// Draining a listener on shutdown. server.close() stops accepting, but Node only drops
// connections it considers idle (a finished request on a keep-alive socket) at the
// moment of the call: a socket that becomes idle later, or that a client opened and never
// used (HTTP clients pre-connect), would hold the listener open until the grace ends.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { performance } from 'node:perf_hooks'

export interface ConnectionTracker {
  /** Closes every connection with no request in flight; safe to call repeatedly. */
  closeUnused(): void
  /** Connections open now. */
  readonly size: number
  /** How long no request has been in flight (ms, performance.now's clock); 0 while one is. */
  idleForMs(): number
}

export function trackConnections(server: Server): ConnectionTracker {
  const inFlight = new Map<Socket, number>()
  let requests = 0
  let idleSince = performance.now()
  server.on('connection', (socket: Socket) => {
    inFlight.set(socket, 0)
    socket.once('close', () => inFlight.delete(socket))
  })
  server.on('request', (req, res) => {
    const socket = req.socket
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1)
    requests++
    res.once('close', () => {
      if (inFlight.has(socket)) inFlight.set(socket, Math.max(0, (inFlight.get(socket) ?? 1) - 1))
      if (--requests === 0) idleSince = performance.now()
    })
  })
  return {
    closeUnused() {
      for (const [socket, requests] of inFlight) if (requests === 0) socket.destroy()
    },
    get size() {
      return inFlight.size
    },
    idleForMs: () => (requests > 0 ? 0 : performance.now() - idleSince),
  }
}
