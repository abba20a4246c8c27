// One RAG request relayed to its backend: the client's body streams into the backend
// request as it arrives (uploads are never held), the reply streams back chunk by chunk
// (SSE and chunked replies reach the client as the backend sends them). A backend that
// cannot be reached is a 502, one that sends no headers in time a 504; once the reply has
// started, a failure can only cut it.
import type { Agent, IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { http } from '../http/node-http.ts'
import https from 'node:https'
import { pipeline } from 'node:stream'
import { gatewayError, type GatewayError } from '../errors.ts'
import { watchBodyPace, type BodyRate } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import { isJsonType, mediaType } from '../http/media-type.ts'
import { statusWithReason } from '../http/status.ts'
import { clientResponseHeaders } from './headers.ts'

export interface RelayTarget {
  /** The service's base URL; the route is appended to its path. */
  readonly base: URL
  readonly agent: Agent
  readonly connectTimeoutMs: number
  readonly responseTimeoutMs: number
  readonly idleTimeoutMs: number
  /** Largest request body passed on; beyond it the exchange ends with a 413. */
  readonly maxBodyBytes: number
  /** For messages: the service's name. */
  readonly service: string
}

export interface RelayOutcome {
  /** When the backend's response headers arrived (ms since the relay began), if they did. */
  readonly headersAfterMs?: number
  /** The reply was cut after it started (backend failed or idled, or the client left). */
  readonly cut: boolean
}

export function relay(
  ctx: RequestContext,
  target: RelayTarget,
  pathAndQuery: string,
  headers: OutgoingHttpHeaders,
  bodyRate: BodyRate,
  /** The body to send instead of the client's stream: one read and checked already (guardrails, rag-prompt.ts). */
  body?: Buffer,
): Promise<RelayOutcome> {
  const { req, res } = ctx
  const started = performance.now()
  const tooLarge = (): GatewayError =>
    gatewayError('rag_body_too_large', {
      message: `Request body too large: the ${target.service} service takes at most ${target.maxBodyBytes} bytes`,
      headers: { connection: 'close' },
    })
  // A declared length over the cap is refused before anything is sent.
  if (Number(req.headers['content-length'] ?? 0) > target.maxBodyBytes) return Promise.reject(tooLarge())
  return new Promise<RelayOutcome>((resolve, reject) => {
    const base = target.base
    const request = (base.protocol === 'https:' ? https : http).request({
      protocol: base.protocol,
      hostname: base.hostname.replace(/^\[|\]$/g, ''),
      port: base.port,
      method: req.method,
      path: base.pathname.replace(/\/+$/, '') + pathAndQuery,
      headers,
      agent: target.agent,
    })
    let settled = false
    let responded = false
    const timers: NodeJS.Timeout[] = []
    const clear = (): void => {
      for (const t of timers) clearTimeout(t)
    }
    const unavailable = (): GatewayError =>
      gatewayError('rag_service_unreachable', { message: `The ${target.service} service is unavailable` })
    const refuse = (refusal: GatewayError): void => {
      if (settled) return
      settled = true
      clear()
      request.destroy()
      reject(refusal)
    }
    const finish = (outcome: RelayOutcome): void => {
      if (settled) return
      settled = true
      clear()
      resolve(outcome)
    }

    // Connecting: a fresh socket must connect in time (a reused keep-alive one already has).
    request.once('socket', (socket) => {
      if (!socket.connecting) return
      const timer = setTimeout(() => refuse(unavailable()), target.connectTimeoutMs)
      timers.push(timer)
      socket.once('connect', () => clearTimeout(timer))
    })
    // Waiting: once the whole request is sent, the response headers must come in time.
    request.once('finish', () => {
      if (responded) return
      timers.push(
        setTimeout(
          () =>
            refuse(
              gatewayError('rag_service_timeout', { message: `The ${target.service} service did not answer in time` }),
            ),
          target.responseTimeoutMs,
        ),
      )
    })
    // After the response began, its own pipeline reports failures; an upload the backend
    // stopped reading (it answered early) is no failure of the exchange.
    request.on('error', () => {
      if (!responded) refuse(unavailable())
    })
    // The client leaving ends the backend request too.
    const onClientGone = (): void => {
      request.destroy()
      finish({ cut: true })
    }
    ctx.signal.addEventListener('abort', onClientGone, { once: true })

    if (body !== undefined) request.end(body)
    else streamBody()
    /** The client's body into the backend request as it arrives (bounded, paced). */
    function streamBody(): void {
      // A chunked body is counted as it streams: past the cap, the backend request is
      // dropped (it never gets a whole body) and the client gets the 413, if nothing else yet.
      if (req.headers['content-length'] === undefined && !req.complete) {
        let received = 0
        const count = (chunk: Buffer): void => {
          received += chunk.length
          if (received <= target.maxBodyBytes) return
          req.off('data', count)
          if (responded) request.destroy()
          else refuse(tooLarge())
        }
        req.on('data', count)
      }
      // Not pipeline(): a backend that answers before reading all of the body must not
      // destroy the client's connection before the answer reaches it.
      req.pipe(request)
      // A body that stops arriving holds a backend connection: it gets the reply's idle bound.
      if (!req.complete) {
        // And it must keep arriving at the server's pace, as a body the gateway reads does:
        // a client that declares more than it sends is answered within a window, not held.
        const stopWatching = watchBodyPace(req, bodyRate, () => refuse(gatewayError('rag_body_timeout')))
        request.once('close', stopWatching)
        const stalled = setTimeout(
          () => refuse(gatewayError('rag_body_timeout', { message: 'The request body stopped arriving' })),
          target.idleTimeoutMs,
        )
        timers.push(stalled)
        // Only while waiting: refresh() would re-arm a timer the response has cleared.
        req.on('data', () => {
          if (!responded && !settled) stalled.refresh()
        })
        req.once('end', () => clearTimeout(stalled))
      }
      req.once('close', () => {
        // A client that stopped sending mid-body: the backend must not take half a body as whole.
        if (!req.complete) request.destroy()
      })
    }

    request.once('response', (upstream: IncomingMessage) => {
      responded = true
      clear()
      const headersAfterMs = performance.now() - started
      const status = upstream.statusCode ?? 502
      // An error without a JSON body (a server's bare 431, a proxy's HTML page) reaches
      // the client in the gateway's {"detail"} shape, its status kept, the text left out.
      if (status >= 400 && !isJsonType(mediaType(upstream.headers['content-type']))) {
        upstream.resume()
        const retryAfter = upstream.headers['retry-after']
        refuse(
          gatewayError('rag_service_error_status', {
            status,
            message: `The ${target.service} service answered ${statusWithReason(status)}`,
            ...(retryAfter === undefined ? {} : { headers: { 'retry-after': retryAfter } }),
          }),
        )
        return
      }
      res.writeHead(status, clientResponseHeaders(upstream))
      // Headers go out now, not with the first chunk: a stream's client sees it has begun.
      res.flushHeaders()
      const idle = setTimeout(() => {
        ctx.log.warn(
          { service: target.service, idleTimeoutMs: target.idleTimeoutMs },
          'RAG backend reply idle too long: cut',
        )
        upstream.destroy()
      }, target.idleTimeoutMs)
      let ended = false
      upstream.on('data', () => {
        if (!ended) idle.refresh()
      })
      pipeline(upstream, res, (err) => {
        ended = true
        clearTimeout(idle)
        ctx.signal.removeEventListener('abort', onClientGone)
        if (err && !res.destroyed) res.destroy()
        // The backend answered before it read the whole body (a 404 to an upload): it wants
        // no more, and a backend that stops reading would hold the rest of the client's body
        // (and the requests pipelined behind it) in the pipe for ever. The rest is read and
        // dropped here instead (bounded: the server's discard after a reply).
        if (!req.complete) {
          req.unpipe(request)
          request.destroy()
          req.resume()
        }
        finish({ headersAfterMs, cut: err !== undefined && err !== null })
      })
    })
  })
}
