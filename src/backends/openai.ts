// The adapter for anything that speaks OpenAI's HTTP API (OpenAI, Azure, vLLM, Ollama).
// http-proxy-3 carries the request: it takes the client's exchange, and this file decides
// what of it reaches the upstream (a re-serialised body, the gateway's key, none of the
// client's credentials) and turns every way an upstream can fail into a GatewayError.
import type { ClientRequest, IncomingMessage } from 'node:http'
import type { Socket } from 'node:net'
import { PassThrough, Stream, type Readable } from 'node:stream'
import type { ProxyServer } from 'http-proxy-3'
import type { OpenAIBackendConfig } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import { HOP_BY_HOP_HEADERS } from '../http/hop-by-hop.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from './port.ts'
import { credentialHeaders, rewriteOutgoingHeaders } from './openai/outgoing-headers.ts'
import { HeaderWait, retryStaleSocket, upstreamConnection } from './http/send.ts'
import { beforeHeadersError } from './http/transport-errors.ts'
import { watchBody } from './http/watch-body.ts'

// Response headers that describe the upstream connection, not the message.
const HOP_BY_HOP = new Set(HOP_BY_HOP_HEADERS)
/** Upstream paths whose URLs a backend keeps parsed. */
const KNOWN_TARGETS = 256

/** One send(): the parts of the exchange that the proxy's events need to reach. */
interface Attempt {
  onProxyReq(proxyReq: ClientRequest, socket: Socket): void
}

export function createOpenAIBackend(
  name: string,
  config: OpenAIBackendConfig,
  apiKey: string | undefined,
): BackendAdapter {
  const root = config.baseUrl.replace(/\/+$/, '')
  const credentials = credentialHeaders(new URL(root).hostname, apiKey)
  const { agent } = upstreamConnection(root, config)
  // 'proxyReq' is emitted on the shared proxy; each call's body source (the `buffer`
  // option, passed through untouched) tells which send() it belongs to.
  const attempts = new WeakMap<object, Attempt>()
  // http-proxy-3 (and follow-redirects with it) is loaded by ready(), before the gateway
  // listens, when a model routes here (the registry readies only those): a gateway with no
  // upstream backend never loads it.
  let proxy: ProxyServer | undefined
  let loading: Promise<ProxyServer> | undefined
  const proxyServer = (): Promise<ProxyServer> =>
    (loading ??= import('http-proxy-3').then(({ createProxyServer }) => {
      const server = createProxyServer({
        agent,
        selfHandleResponse: true,
        ignorePath: true,
        // With ignorePath the client's path is dropped; toProxy only spares http-proxy-3 parsing it into a URL first.
        toProxy: true,
        changeOrigin: true,
        // Armed only while a fresh socket connects; a reused keep-alive socket is not timed.
        connectTimeout: config.connectTimeoutMs,
      })
      server.on('proxyReq', (proxyReq, _req, _res, options, socket) => {
        const attempt = options.buffer === undefined ? undefined : attempts.get(options.buffer)
        attempt?.onProxyReq(proxyReq, socket)
      })
      // Every call passes its own error callback, so errors arrive there. This listener only
      // keeps http-proxy-3 from rethrowing the few it emits on the server instead.
      server.on('error', () => undefined)
      proxy = server
      return server
    }))

  // Each upstream path's URL, checked and parsed once: most calls name one of a few paths
  // (those that carry an id are many, so the memory is dropped whole when it is full).
  const targets = new Map<string, URL>()
  const targetOf = (path: string): URL => {
    let url = targets.get(path)
    if (url === undefined) {
      url = new URL(root + checkedPath(path))
      if (targets.size >= KNOWN_TARGETS) targets.clear()
      targets.set(path, url)
    }
    return url
  }

  function send(request: UpstreamRequest): Promise<UpstreamResponse> {
    return retryStaleSocket(request.signal, () => attempt(request))
  }

  async function attempt(request: UpstreamRequest): Promise<UpstreamResponse> {
    const server = proxy ?? (await proxyServer())
    return new Promise<UpstreamResponse>((resolve, reject) => {
      const target = targetOf(request.path)
      const framing = framingOf(request.body)
      const outgoing: Record<string, string> = {
        ...config.headers,
        ...framing.headers,
        'accept-encoding': 'identity',
        'x-request-id': request.requestId,
        // Traces on: the upstream is told of this attempt's span (the client's traceparent is its ancestor).
        ...request.trace,
        ...credentials,
      }

      let proxyReq: ClientRequest | undefined
      const wait = new HeaderWait(request.signal, config.responseTimeoutMs, {
        onFail(error) {
          proxyReq?.destroy()
          framing.discard()
          reject(error)
        },
        // Once the client has gone, http-proxy-3 has dropped the request for good: no retry.
        reusedSocket: () => proxyReq?.reusedSocket === true && !request.client.res.destroyed,
      })
      if (wait.settled) return

      function onResponse(proxyRes: IncomingMessage): void {
        if (!wait.settle()) {
          proxyRes.destroy()
          return
        }
        resolve({
          status: proxyRes.statusCode ?? 502,
          headers: responseHeaders(proxyRes),
          body: watchBody(proxyRes, config.idleTimeoutMs, request.signal),
        })
      }

      attempts.set(framing.source, {
        onProxyReq(req, socket) {
          proxyReq = req
          attempts.delete(framing.source)
          if (wait.settled) {
            req.destroy()
            return
          }
          // http-proxy-3's connectTimeout times the connection; this follows it for the header timeout.
          wait.watchSocket(socket)
          try {
            rewriteOutgoingHeaders(req, outgoing)
          } catch (err) {
            wait.fail(gatewayError('internal', { cause: err }))
            return
          }
          req.once('response', onResponse)
          // A close before any response settles this call even when http-proxy-3 keeps the
          // error to itself (it does so for resets after the client went away).
          // Every call's request closes, most after the response settled the call: the
          // error (with its stack) is built only when it is still news.
          req.once('close', () => {
            if (wait.settled) return
            wait.fail(
              request.client.res.destroyed
                ? // http-proxy-3 drops the upstream request when the client leaves; that is
                  // final, whatever the gateway's signal has said so far.
                  gatewayError('upstream_timeout', { message: 'The client went away before the upstream answered.' })
                : gatewayError('upstream_unreachable', {
                    message: 'The upstream connection closed before a response arrived.',
                  }),
            )
          })
          framing.send(req, (err) => wait.fail(gatewayError('internal', { cause: err })))
        },
      })

      server.web(
        request.client.req,
        request.client.res,
        {
          target,
          buffer: framing.source,
          method: request.method,
          // Node sends the headers of a request with Expect at once, before 'proxyReq' could
          // remove the client's credentials; an empty value keeps it from doing so.
          headers: { expect: '' },
        },
        (err) => wait.fail(beforeHeadersError(err)),
      )
    })
  }

  return {
    name,
    type: 'openai',
    supports: () => true,
    async ready() {
      await proxyServer()
    },
    send,
    async close() {
      agent.destroy()
      if (loading !== undefined) (await loading).close()
    },
  }
}

/**
 * How a call's body reaches the upstream. Nothing may flow into the upstream request until its
 * headers are rewritten: a body that started early would send the client's headers before
 * 'proxyReq' could act. http-proxy-3 pipes `source` (its `buffer` option) into the request as
 * it makes it, and send() lets the body go once the headers are rewritten.
 */
interface Framing {
  readonly headers: Record<string, string>
  readonly source: Stream
  send(request: ClientRequest, onError: (err: unknown) => void): void
  /** Drops what is held for an attempt that failed before send(). */
  discard(): void
}

/**
 * The source of a body in memory (JSON, or none): piping it is a no-op, and send() ends the
 * request with the bytes, so headers and body leave in one write. No stream per call.
 */
class InMemoryBody extends Stream {
  override pipe<T extends NodeJS.WritableStream>(destination: T): T {
    return destination
  }
}

function framingOf(body: RequestBody): Framing {
  switch (body.kind) {
    case 'json': {
      const bytes = body.wire ?? Buffer.from(JSON.stringify(body.value), 'utf8')
      return {
        headers: { 'content-type': 'application/json', 'content-length': String(bytes.length) },
        source: new InMemoryBody(),
        send: (request) => {
          request.end(bytes)
        },
        discard: () => undefined,
      }
    }
    case 'multipart': {
      // Held in a gate until send(), which opens a fresh stream of the upload each time: the
      // same upload can be replayed to another deployment.
      const gate = new PassThrough()
      return {
        headers: { 'content-type': body.contentType, 'content-length': String(body.size) },
        source: gate,
        send(_request, onError) {
          const source: Readable = body.open()
          source.once('error', onError)
          source.pipe(gate)
        },
        discard: () => gate.destroy(),
      }
    }
    case 'none':
      return {
        headers: {},
        source: new InMemoryBody(),
        send: (request) => {
          request.end()
        },
        discard: () => undefined,
      }
  }
}

/**
 * The path comes from the router and may carry client-supplied ids. A dot segment would
 * be resolved by URL parsing and reach an upstream path the router never approved.
 */
function checkedPath(path: string): string {
  const pathname = path.split('?', 1)[0] ?? ''
  const segments = pathname.split('/').map((s) => s.toLowerCase())
  if (
    !pathname.startsWith('/') ||
    segments.some((s) => s === '.' || s === '..' || s === '%2e' || s === '%2e%2e' || s === '.%2e' || s === '%2e.')
  ) {
    throw gatewayError('unknown_route')
  }
  return path
}

function responseHeaders(proxyRes: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(proxyRes.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue
    // Node lower-cases names; only set-cookie arrives as a list.
    headers[name] = Array.isArray(value) ? value.join(', ') : value
  }
  return headers
}
