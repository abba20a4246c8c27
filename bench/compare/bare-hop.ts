// The reference of `npm run bench -- compare`: a bare http-proxy-3 hop with a keep-alive
// agent in front of the upstream, and nothing else (no auth, no body reading, no limits,
// no logs). What Tollgate costs is read as a ratio to this. Prints {"port": N}.
//
//   node bench/compare/bare-hop.ts <upstream url>
import http from 'node:http'
import { createProxyServer } from 'http-proxy-3'

const target = process.argv[2]
if (!target) throw new Error('usage: bare-hop.ts <upstream url>')
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 })
const proxy = createProxyServer({ target, agent })
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502).end()
  else res.destroy()
})
const server = http.createServer((req, res) => proxy.web(req, res))
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`)
})
process.on('SIGTERM', () => {
  server.close()
  server.closeAllConnections()
  agent.destroy()
  process.exit(0)
})
