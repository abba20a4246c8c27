// One bounded JSON POST to an external check: the whole exchange (connect, send, the
// answer's last byte) within the check's timeout, at most maxBytes of answer read. Only a
// 2xx answer with a body is a success; anything else is a failure whose reason names what
// happened (a status, a timeout, a refused connection) and never the answer's content,
// which might carry the call's text. node:http, not fetch: the gateway keeps undici
// unloaded (http/node-http.ts).
import type { Agent as HttpAgent, IncomingMessage } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import type { z } from 'zod'
import { http } from '../../http/node-http.ts'

export interface PostLimits {
  readonly timeoutMs: number
  readonly maxBytes: number
}

/** Why a check gave no usable answer: `timeout` when the time ran out, else `error`. */
export class CheckFailure extends Error {
  readonly kind: 'timeout' | 'error'
  constructor(kind: 'timeout' | 'error', message: string) {
    super(message)
    this.kind = kind
  }
}

/** Connections kept open between calls (a check runs on every call it covers), one pool per scheme. */
export interface Agents {
  readonly http: HttpAgent
  readonly https: HttpsAgent
}

export function createAgents(): Agents {
  return { http: new http.Agent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) }
}

/** POSTs `body` to `url`; the answer's text, or a CheckFailure. */
export function postJson(
  url: URL,
  headers: Readonly<Record<string, string>>,
  body: string,
  limits: PostLimits,
  agents: Agents,
): Promise<string> {
  return new Promise((resolve, reject) => {
    let settled = false
    const fail = (kind: 'timeout' | 'error', message: string): void => {
      if (settled) return
      settled = true
      clearTimeout(deadline)
      req.destroy()
      reject(new CheckFailure(kind, message))
    }
    const https = url.protocol === 'https:'
    const req = (https ? httpsRequest : http.request)(
      url,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'Tollgate-Guardrails',
        },
        agent: https ? agents.https : agents.http,
      },
      (res: IncomingMessage) => {
        const status = res.statusCode ?? 0
        if (status < 200 || status >= 300) {
          res.resume()
          fail('error', `answered ${status}`)
          return
        }
        const chunks: Buffer[] = []
        let read = 0
        res.on('data', (chunk: Buffer) => {
          read += chunk.length
          if (read > limits.maxBytes) fail('error', `an answer over ${limits.maxBytes} bytes`)
          else chunks.push(chunk)
        })
        res.on('end', () => {
          if (settled) return
          settled = true
          clearTimeout(deadline)
          resolve(Buffer.concat(chunks).toString('utf8'))
        })
        res.on('error', () => fail('error', 'the answer broke off'))
        res.on('aborted', () => fail('error', 'the answer broke off'))
      },
    )
    const deadline = setTimeout(() => fail('timeout', `no answer within ${limits.timeoutMs} ms`), limits.timeoutMs)
    req.on('error', (err: NodeJS.ErrnoException) => fail('error', `could not be reached (${err.code ?? 'error'})`))
    req.end(body)
  })
}

/** A service's answer read as JSON and checked by `schema`: its value, or the problem to report (never the answer). */
export function readAnswer<T>(
  answer: string,
  schema: z.ZodType<T>,
  notInShape: string,
): { value: T } | { problem: string } {
  let parsed: unknown
  try {
    parsed = JSON.parse(answer)
  } catch {
    return { problem: 'an answer that is not JSON' }
  }
  const valid = schema.safeParse(parsed)
  return valid.success ? { value: valid.data } : { problem: notInShape }
}
