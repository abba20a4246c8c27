// A cap on the connections one client address holds open, so that one client (a
// slowloris, a runaway pool) cannot use up the file descriptors and memory everyone
// shares. Checked when the connection is accepted, before any byte is parsed: the
// refusal is one static write and a close.
import type { Server } from 'node:http'
import type { Socket } from 'node:net'
import { gatewayError } from '../errors.ts'
import { addressKey } from './client-address.ts'
import { rawErrorReply } from './raw-reply.ts'

export interface ConnectionCap {
  /** Open connections of this address now (tests and metrics). */
  openFrom(address: string): number
}

export function capConnectionsPerAddress(server: Server, max: number): ConnectionCap {
  const open = new Map<string, number>()
  const refusal = rawErrorReply(
    gatewayError('too_many_connections', {
      message: `Too many open connections from your address (at most ${max}). Close idle ones or reuse them.`,
      headers: { 'retry-after': '1' },
    }),
  )
  if (max > 0) {
    // Before Node's HTTP listener, so a refused socket never gets a parser's attention.
    server.prependListener('connection', (socket: Socket) => {
      const address = addressKey(socket.remoteAddress ?? 'unknown')
      const count = open.get(address) ?? 0
      if (count >= max) {
        socket.write(refusal)
        socket.destroy()
        return
      }
      open.set(address, count + 1)
      socket.once('close', () => {
        const left = (open.get(address) ?? 1) - 1
        if (left <= 0) open.delete(address)
        else open.set(address, left)
      })
    })
  }
  return { openFrom: (address) => open.get(addressKey(address)) ?? 0 }
}
