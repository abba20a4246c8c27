// How the children of `npm run bench -- compare` (the upstream and the bare hop) serve:
// keep-alive connections, a free loopback port announced as {"port": N} on stdout (what
// compare.ts's startChild waits for), and a quick stop on SIGTERM.
import type { Server } from 'node:http'

export function serveChild(server: Server, onStop?: () => void): void {
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`)
  })
  process.on('SIGTERM', () => {
    server.close()
    server.closeAllConnections()
    onStop?.()
    process.exit(0)
  })
}
