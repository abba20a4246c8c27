// The reference of `npm run bench -- compare`: a bare http-proxy-3 hop with a keep-alive
// agent in front of the upstream, and nothing else (no auth, no body reading, no limits,
// no logs). What Tollgate costs is read as a ratio to this. Prints {"port": N}.
//
//   node bench/compare/bare-hop.ts <upstream url>
import http from 'node:http'
import { createProxyServer } from 'http-proxy-3'
import { serveChild } from './child-server.ts'

const target = process.argv[2]
if (!target) throw new Error('usage: bare-hop.ts <upstream url>')
const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 })
const proxy = createProxyServer({ target, agent })
proxy.on('error', (_err, _req, res) => {
  if ('writeHead' in res && !res.headersSent) res.writeHead(502).end()
  else res.destroy()
})
serveChild(
  http.createServer((req, res) => proxy.web(req, res)),
  () => agent.destroy(),
)
