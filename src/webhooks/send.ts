// One webhook request, made so that it cannot be turned against the gateway's own network
// (address-guard.ts): the host is resolved here, every address it resolves to is checked,
// and the connection goes to an address that passed, the one that was checked (the socket
// is given the address, not the name, so a DNS answer that changes between the check and
// the connect changes nothing). A redirect is an answer, never followed. The connect, the
// whole exchange and the bytes read of the answer are bounded; the answer's body is read
// only to be thrown away.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import type { IncomingMessage } from 'node:http'
import { http } from '../http/node-http.ts'
import { request as httpsRequest } from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import type { AddressGuard } from './address-guard.ts'

export interface SendLimits {
  readonly connectTimeoutMs: number
  /** The whole exchange, connect included, up to the end of the answer (or of what is read of it). */
  readonly timeoutMs: number
  /** Bytes of the answer's body read at most; past them the connection is closed. */
  readonly maxResponseBytes: number
}

export interface SendRequest {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export interface SendResult {
  /** The status the endpoint answered, or null when there was no answer. */
  readonly status: number | null
  /** Why this is not a success (no answer, a refused address, a redirect, a non-2xx), or null. */
  readonly error: string | null
  readonly durationMs: number
}

class Refused extends Error {}

/** Resolves a host name to the addresses the guard lets through; refuses when none is. */
function guardedLookup(guard: AddressGuard): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { all: true, family: options.family ?? 0 }, (error, addresses: LookupAddress[]) => {
      if (error !== null) return callback(error, '', 0)
      const passed = addresses.filter((a) => guard.refusal(a.address) === null)
      const first = passed[0]
      if (first === undefined) {
        const reason = addresses[0] === undefined ? 'no address' : guard.refusal(addresses[0].address)
        return callback(new Refused(`refused: ${hostname} resolves to ${reason ?? 'no address'}`), '', 0)
      }
      if (options.all === true) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, passed)
      callback(null, first.address, first.family)
    })
  }
}

export function sendWebhook(
  request: SendRequest,
  guard: AddressGuard,
  limits: SendLimits,
  now: () => number = performance.now.bind(performance),
): Promise<SendResult> {
  const started = now()
  const done = (status: number | null, error: string | null): SendResult => ({
    status,
    error,
    durationMs: Math.max(0, now() - started),
  })
  let url: URL
  try {
    url = new URL(request.url)
  } catch {
    return Promise.resolve(done(null, 'refused: not a URL'))
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return Promise.resolve(done(null, 'refused: only http and https'))
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  if (isIP(host) !== 0) {
    const refusal = guard.refusal(host)
    if (refusal !== null) return Promise.resolve(done(null, `refused: ${refusal}`))
  }
  return new Promise((resolve) => {
    let settled = false
    const finish = (status: number | null, error: string | null): void => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      clearTimeout(connectDeadline)
      resolve(done(status, error))
    }
    const make = url.protocol === 'https:' ? httpsRequest : http.request
    const req = make(
      url,
      {
        method: 'POST',
        headers: {
          ...request.headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(request.body)),
          'user-agent': 'Tollgate-Webhooks',
        },
        // A fresh connection for each delivery: a pooled socket would skip the address check.
        agent: false,
        lookup: guardedLookup(guard),
      },
      (res: IncomingMessage) => onResponse(res),
    )
    const deadline = setTimeout(() => {
      req.destroy()
      finish(null, `no answer within ${limits.timeoutMs} ms`)
    }, limits.timeoutMs)
    let connectDeadline: NodeJS.Timeout | undefined
    req.on('socket', (socket) => {
      connectDeadline = setTimeout(() => {
        req.destroy()
        finish(null, `could not connect within ${limits.connectTimeoutMs} ms`)
      }, limits.connectTimeoutMs)
      socket.once('connect', () => clearTimeout(connectDeadline))
    })
    req.on('error', (error: Error) => {
      const reason =
        error instanceof Refused || error.message.startsWith('refused:')
          ? error.message
          : `${(error as NodeJS.ErrnoException).code ?? 'error'}: ${error.message}`
      finish(null, reason)
    })

    function onResponse(res: IncomingMessage): void {
      const status = res.statusCode ?? 0
      let read = 0
      const verdict = (): string | null => {
        if (status >= 200 && status < 300) return null
        if (status >= 300 && status < 400)
          return `redirect not followed (${status}${res.headers.location === undefined ? '' : ` to ${String(res.headers.location).slice(0, 200)}`})`
        return `answered ${status}`
      }
      res.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > limits.maxResponseBytes) {
          // Enough: the status is what counts. The rest is not read.
          res.destroy()
          req.destroy()
          finish(status, verdict())
        }
      })
      res.on('end', () => finish(status, verdict()))
      res.on('error', () => finish(status, verdict()))
      res.on('close', () => finish(status, verdict()))
    }
    req.end(request.body)
  })
}
