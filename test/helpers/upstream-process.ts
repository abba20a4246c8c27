// A separate OpenAI-compatible server process for end-to-end tests: plain HTTP under /v1,
// answered by the mock adapter's logic, so Tollgate talks to it exactly as it would to
// vLLM. Run: node test/helpers/upstream-process.ts [--fail-status 503] [--delay-ms 0]
// [--require-key KEY] [--tokens-per-second N] [--keep-alive-ms N] [--record-bodies]. Prints {"port": N} once listening. GET /__requests lists what
// it received (method, path, headers, model, the body's first 64 KiB) for assertions; GET /__streams, for each
// streamed reply, the bytes it has written so far and whether it ended or was cut.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { parseArgs } from 'node:util'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import type { UpstreamRequest } from '../../src/backends/port.ts'
import { ENDPOINTS, type Endpoint } from '../../src/config/schema.ts'
import { readJsonBody, readMultipartBody, type RequestBody } from '../../src/http/body.ts'

const { values } = parseArgs({
  options: {
    'fail-status': { type: 'string' },
    'delay-ms': { type: 'string', default: '0' },
    'require-key': { type: 'string' },
    'tokens-per-second': { type: 'string', default: '2000' },
    // How long an idle keep-alive connection stays open (Node's default, like uvicorn's, is 5 s).
    'keep-alive-ms': { type: 'string' },
    // Keep each request's body (its first 64 KiB) for /__requests: off for long fuzz runs.
    'record-bodies': { type: 'boolean', default: false },
  },
})
const failStatus = values['fail-status'] ? Number(values['fail-status']) : 0
const delayMs = Number(values['delay-ms'])
const backend = createMockBackend('upstream', {
  type: 'mock',
  tokensPerSecond: Number(values['tokens-per-second']),
  defaultCompletionTokens: 24,
  fineTuneStepMs: 250,
})
const streams: Array<{ path: string; bytes: number; state: 'open' | 'ended' | 'closed' }> = []
const seen: Array<{
  method: string
  path: string
  headers: Record<string, unknown>
  model: unknown
  streamOptions: unknown
  body: string
}> = []
/** How much of each request body is kept for assertions (ids, not payloads). */
const KEPT_BODY_CHARS = 64 * 1024

const ROUTES: Array<[string, RegExp, Endpoint]> = [
  ['POST', /^\/v1\/chat\/completions$/, 'chat.completions'],
  ['POST', /^\/v1\/completions$/, 'completions'],
  ['POST', /^\/v1\/responses$/, 'responses'],
  ['POST', /^\/v1\/embeddings$/, 'embeddings'],
  ['POST', /^\/v1\/audio\/transcriptions$/, 'audio.transcriptions'],
  ['POST', /^\/v1\/audio\/translations$/, 'audio.translations'],
  ['POST', /^\/v1\/images\/generations$/, 'images.generations'],
  ['POST', /^\/v1\/images\/edits$/, 'images.edits'],
  ['POST', /^\/v1\/files$/, 'files.create'],
  ['GET', /^\/v1\/files(\/[^/]+)?$/, 'files.list'],
  ['GET', /^\/v1\/files\/[^/]+\/content$/, 'files.content'],
  ['GET', /^\/v1\/files\/validate\/[^/]+$/, 'files.validate'],
  ['DELETE', /^\/v1\/files\/[^/]+$/, 'files.delete'],
  ['POST', /^\/v1\/fine_tuning\/jobs$/, 'fine_tuning.jobs.create'],
  ['GET', /^\/v1\/fine_tuning\/jobs(\/[^/]+)?$/, 'fine_tuning.jobs.list'],
  ['POST', /^\/v1\/fine_tuning\/jobs\/[^/]+\/cancel$/, 'fine_tuning.jobs.cancel'],
  ['GET', /^\/v1\/fine_tuning\/jobs\/[^/]+\/events$/, 'fine_tuning.jobs.events'],
  ['POST', /^\/v1\/vector_stores$/, 'vector_stores.create'],
  ['GET', /^\/v1\/vector_stores(\/[^/]+)?$/, 'vector_stores.list'],
  ['POST', /^\/v1\/vector_stores\/[^/]+$/, 'vector_stores.update'],
  ['DELETE', /^\/v1\/vector_stores\/[^/]+$/, 'vector_stores.delete'],
  ['POST', /^\/v1\/vector_stores\/[^/]+\/search$/, 'vector_stores.search'],
  ['POST', /^\/v1\/vector_stores\/[^/]+\/files$/, 'vector_stores.files.create'],
  ['GET', /^\/v1\/vector_stores\/[^/]+\/files(\/[^/]+(\/content)?)?$/, 'vector_stores.files.list'],
  ['POST', /^\/v1\/vector_stores\/[^/]+\/files\/[^/]+$/, 'vector_stores.files.update'],
  ['DELETE', /^\/v1\/vector_stores\/[^/]+\/files\/[^/]+$/, 'vector_stores.files.delete'],
  ['POST', /^\/v1\/vector_stores\/[^/]+\/file_batches$/, 'vector_stores.file_batches.create'],
  ['GET', /^\/v1\/vector_stores\/[^/]+\/file_batches\/[^/]+(\/files)?$/, 'vector_stores.file_batches.list'],
  ['POST', /^\/v1\/vector_stores\/[^/]+\/file_batches\/[^/]+\/cancel$/, 'vector_stores.file_batches.cancel'],
]
void ENDPOINTS

const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
  const url = req.url ?? '/'
  const path = url.split('?')[0] ?? '/'
  if (path === '/__streams') {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(streams))
    return
  }
  if (path === '/__requests') {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(seen))
    return
  }
  if (values['require-key'] && req.headers.authorization !== `Bearer ${values['require-key']}`) {
    res.statusCode = 401
    res.setHeader('content-type', 'application/json')
    res.end(
      JSON.stringify({
        error: { message: 'bad upstream key', type: 'invalid_request_error', param: null, code: 'invalid_api_key' },
      }),
    )
    return
  }
  const route = ROUTES.find(([m, re]) => m === req.method && re.test(path))
  if (!route) {
    res.statusCode = 404
    res.end('{"error":{"message":"not found","type":"invalid_request_error","param":null,"code":null}}')
    return
  }
  try {
    let body: RequestBody = { kind: 'none' }
    if (req.method === 'POST' && (req.headers['content-type'] ?? '').startsWith('multipart/'))
      body = await readMultipartBody(req, 1 << 30, tmpdir())
    else if (req.method === 'POST' && req.headers['content-length'] !== '0' && req.headers['content-type'])
      body = await readJsonBody(req, 1 << 30)
    else req.resume()
    const json = body.kind === 'json' ? body.value : {}
    const text = !values['record-bodies']
      ? ''
      : body.kind === 'json'
        ? JSON.stringify(json)
        : body.kind === 'multipart'
          ? JSON.stringify(body.fields)
          : ''
    seen.push({
      method: req.method ?? '',
      path: url,
      headers: req.headers,
      model: body.kind === 'json' ? json.model : body.kind === 'multipart' ? body.fields.model : undefined,
      streamOptions: json.stream_options,
      body: text.slice(0, KEPT_BODY_CHARS),
    })
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs))
    if (failStatus) {
      res.statusCode = failStatus
      res.setHeader('content-type', 'application/json')
      res.end(
        JSON.stringify({
          error: { message: `upstream failing with ${failStatus}`, type: 'server_error', param: null, code: null },
        }),
      )
      return
    }
    const controller = new AbortController()
    res.on('close', () => controller.abort())
    const request: UpstreamRequest = {
      endpoint: route[2],
      method: req.method as 'GET' | 'POST' | 'DELETE',
      path: url.slice(3),
      model: typeof json.model === 'string' ? json.model : null,
      body,
      requestId: String(req.headers['x-request-id'] ?? ''),
      signal: controller.signal,
      client: { req, res },
    }
    // The spooled upload goes once the reply is over.
    if (body.kind === 'multipart')
      res.once('close', () => {
        void body.dispose()
      })
    const answer = await backend.send(request)
    res.writeHead(answer.status, answer.headers)
    if (String(answer.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      // What the reply got out of this process: pipe() stops reading the body while the
      // socket will not take more, so this stops growing when the reader is behind.
      const stream = { path, bytes: 0, state: 'open' as 'open' | 'ended' | 'closed' }
      streams.push(stream)
      answer.body.on('data', (chunk: Buffer) => {
        stream.bytes += chunk.length
      })
      res.once('finish', () => {
        stream.state = 'ended'
      })
      res.once('close', () => {
        if (stream.state === 'open') stream.state = 'closed'
      })
    }
    answer.body.pipe(res)
  } catch (err) {
    res.statusCode = 500
    res.end(JSON.stringify({ error: { message: String(err), type: 'server_error', param: null, code: null } }))
  }
}
// What escapes handle() (its own 500 reply failing) is logged and the connection dropped, not left unhandled.
const server = createServer((req, res) => {
  handle(req, res).catch((err: unknown) => {
    process.stderr.write(`upstream: ${String(err)}\n`)
    res.destroy()
  })
})
if (values['keep-alive-ms'] !== undefined) server.keepAliveTimeout = Number(values['keep-alive-ms'])
server.listen(0, '127.0.0.1', () => {
  const address = server.address()
  process.stdout.write(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }) + '\n')
})
process.on('SIGTERM', () => {
  server.closeAllConnections()
  server.close(() => process.exit(0))
})
