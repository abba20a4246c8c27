// One HTTP request to an upstream, up to its response headers, as every HTTP adapter sends it
// (openai through http-proxy-3, anthropic and gemini with their own request): the response
// header timeout that tells "never reached it" (upstream_unreachable: another deployment may
// take it) from "it has the request and says nothing" (upstream_timeout: final), the call's
// abort, and one more try when a kept-alive socket turns out to have been closed under us.
// What happens after the headers (the body's idle watchdog) is watch-body.ts's.
import type { Agent, ClientRequest, IncomingMessage } from 'node:http'
import https from 'node:https'
import type { Socket } from 'node:net'
import { GatewayError, gatewayError } from '../../errors.ts'
import { http } from '../../http/node-http.ts'
import type { UpstreamRequest } from '../port.ts'
import { beforeHeadersError } from './transport-errors.ts'

export interface UpstreamTimeouts {
  readonly connectTimeoutMs: number
  readonly responseTimeoutMs: number
}

/** One backend's connection to its upstream: a keep-alive agent and the timeouts of its calls. */
export interface UpstreamConnection {
  readonly agent: Agent
  readonly secure: boolean
  readonly timeouts: UpstreamTimeouts
}

export function upstreamConnection(
  url: string,
  config: UpstreamTimeouts & { readonly maxSockets: number },
): UpstreamConnection {
  const secure = url.startsWith('https:')
  const agentOptions = { keepAlive: true, maxSockets: config.maxSockets }
  return {
    agent: secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
    secure,
    timeouts: { connectTimeoutMs: config.connectTimeoutMs, responseTimeoutMs: config.responseTimeoutMs },
  }
}

/**
 * Failures on a kept-alive socket the upstream had just closed (it closed the idle
 * connection as our request went out, so it never read it): Node's documented race,
 * answered as Node's documentation advises, by sending once more on another socket.
 */
const staleSocket = new WeakSet<GatewayError>()

/** Runs `attempt`, and once more when it failed on a stale keep-alive socket and the call still stands. */
export async function retryStaleSocket<T>(signal: AbortSignal, attempt: () => Promise<T>): Promise<T> {
  try {
    return await attempt()
  } catch (err) {
    if (!(err instanceof GatewayError) || !staleSocket.has(err) || signal.aborted) throw err
    return attempt()
  }
}

/**
 * One attempt's wait for the response headers: it settles once, by `settle()` (the headers
 * came) or by `fail()` (a timeout, the call's abort, a transport error), and stops its timer
 * and its abort listener either way. Constructed on an aborted signal, it fails at once.
 */
export class HeaderWait {
  /** The socket is connected: a timeout now means the upstream has the request. */
  connected = false
  #settled = false
  readonly #signal: AbortSignal
  readonly #timer: NodeJS.Timeout
  readonly #onFail: (error: GatewayError) => void
  readonly #reusedSocket: () => boolean

  /**
   * `onFail` drops the attempt (its request, its body) and rejects; `reusedSocket` says the
   * request went out on a kept-alive socket, so an unreachable upstream may be a stale socket.
   */
  constructor(
    signal: AbortSignal,
    responseTimeoutMs: number,
    handlers: { onFail(error: GatewayError): void; reusedSocket(): boolean },
  ) {
    this.#signal = signal
    this.#onFail = handlers.onFail
    this.#reusedSocket = handlers.reusedSocket
    this.#timer = setTimeout(() => {
      // Still connecting means nothing was sent: another deployment may take it.
      this.fail(
        this.connected
          ? gatewayError('upstream_timeout', {
              message: `The upstream model server sent no response headers within ${responseTimeoutMs} ms.`,
            })
          : gatewayError('upstream_unreachable', {
              message: `The upstream model server could not be reached within ${responseTimeoutMs} ms.`,
            }),
      )
    }, responseTimeoutMs)
    if (signal.aborted) this.#onAbort()
    else signal.addEventListener('abort', this.#onAbort, { once: true })
  }

  get settled(): boolean {
    return this.#settled
  }

  /** The headers came: true unless the attempt had already failed (then drop the response). */
  settle(): boolean {
    if (this.#settled) return false
    this.#stop()
    return true
  }

  fail(error: GatewayError): void {
    if (this.#settled) return
    if (error.errorName === 'upstream_unreachable' && this.#reusedSocket()) staleSocket.add(error)
    this.#stop()
    this.#onFail(error)
  }

  /** Follows the socket's connection; with `connectTimeoutMs`, a connection that takes longer fails. */
  watchSocket(socket: Socket, connectTimeoutMs?: number): void {
    this.connected = !socket.connecting
    if (this.connected || this.#settled) return
    const connectTimer =
      connectTimeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            this.fail(
              gatewayError('upstream_unreachable', {
                message: `The upstream model server could not be reached within ${connectTimeoutMs} ms.`,
              }),
            )
          }, connectTimeoutMs)
    socket.once('connect', () => {
      this.connected = true
      clearTimeout(connectTimer)
    })
    socket.once('close', () => clearTimeout(connectTimer))
  }

  #stop(): void {
    this.#settled = true
    clearTimeout(this.#timer)
    this.#signal.removeEventListener('abort', this.#onAbort)
  }

  readonly #onAbort = (): void => {
    const reason: unknown = this.#signal.reason
    this.fail(
      reason instanceof GatewayError
        ? reason
        : gatewayError('upstream_timeout', {
            message: 'The request was cancelled before the upstream answered.',
            cause: reason,
          }),
    )
  }
}

/**
 * Sends `bytes` to `url` (POST) and resolves with the upstream's response once its headers
 * are in; rejects with the GatewayError failover expects. Retries once on a stale socket.
 */
export function sendUpstream(
  connection: UpstreamConnection,
  url: URL,
  headers: Readonly<Record<string, string>>,
  bytes: Buffer,
  request: UpstreamRequest,
): Promise<IncomingMessage> {
  return retryStaleSocket(request.signal, () => post(connection, url, headers, bytes, request.signal))
}

function post(
  connection: UpstreamConnection,
  url: URL,
  headers: Readonly<Record<string, string>>,
  bytes: Buffer,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    // The request is made once the wait stands (a call cancelled already makes none).
    const sent: { req?: ClientRequest } = {}
    const wait = new HeaderWait(signal, connection.timeouts.responseTimeoutMs, {
      onFail(error) {
        sent.req?.destroy()
        reject(error)
      },
      reusedSocket: () => sent.req?.reusedSocket === true,
    })
    if (wait.settled) return
    const req = (sent.req = (connection.secure ? https : http).request(url, {
      method: 'POST',
      agent: connection.agent,
      headers: { ...headers, 'content-length': String(bytes.length) },
    }))
    req.once('socket', (socket) => wait.watchSocket(socket, connection.timeouts.connectTimeoutMs))
    req.on('error', (err) => wait.fail(beforeHeadersError(err)))
    req.once('response', (response) => {
      if (wait.settle()) resolve(response)
      else response.destroy()
    })
    req.end(bytes)
  })
}
