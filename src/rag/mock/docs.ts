// Each mock service's /openapi.json, /redoc and /docs, as a FastAPI app serves them.
import type { MockExchange } from './reply.ts'

export function serveDocs(x: MockExchange): boolean {
  if (x.req.method !== 'GET') return false
  if (x.path === '/openapi.json') {
    const body = JSON.stringify({
      openapi: '3.1.0',
      info: { title: `${x.service} (Tollgate mock)`, version: '0.0.0-mock', description: 'The built-in mock of this RAG service: deterministic answers that say they come from a mock.' },
      paths: {},
    })
    x.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    x.res.end(body)
    return true
  }
  if (x.path === '/redoc' || x.path === '/docs') {
    const body = `<!doctype html><html><head><title>${x.service} - ${x.path === '/redoc' ? 'ReDoc' : 'Swagger UI'} (mock)</title></head>` +
      `<body><p>Tollgate mock of ${x.service}: the API reference would load <code>openapi.json</code> here.</p></body></html>\n`
    x.res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body) })
    x.res.end(body)
    return true
  }
  return false
}
