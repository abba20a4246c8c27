// Raw HTTP for what the SDK hides: exact headers, bodies that lie, sockets cut short.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { connect } from 'node:net'

export interface RawResponse {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  json<T = { error: { message: string; type: string; param: string | null; code: string | null } }>(): T
}

export async function request(url: string, init: RequestInit = {}): Promise<RawResponse> {
  const res = await fetch(url, init)
  const text = await res.text()
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) }
}

/** A reply read whole off a node:http response, its body as text. */
export interface TextReply {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

/** A node:http response callback: reads the body to its end as UTF-8 text and hands the reply to `done`. */
export function readText(done: (reply: TextReply) => void): (res: IncomingMessage) => void {
  return (res) => {
    let body = ''
    res
      .setEncoding('utf8')
      .on('data', (c: string) => {
        body += c
      })
      .once('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body }))
  }
}

/** One chat completion ("hi", `maxTokens` at most) on the v2 route with an API key: the reply, unread. */
export function chatWith(url: string, key: string, model: string, maxTokens: number): Promise<Response> {
  return fetch(`${url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens }),
  })
}

/** Sends raw bytes on a fresh socket and returns what came back before the server closed or `ms` passed. */
export function rawExchange(port: number, payload: string | Buffer, ms = 3000): Promise<string> {
  return new Promise((done, fail) => {
    const socket = connect(port, '127.0.0.1')
    let received = ''
    const timer = setTimeout(() => {
      socket.destroy()
      done(received)
    }, ms)
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => {
      received += chunk
      // One complete response is enough.
      const headerEnd = received.indexOf('\r\n\r\n')
      const length = /content-length: (\d+)/i.exec(received)
      if (headerEnd !== -1 && length && received.length >= headerEnd + 4 + Number(length[1])) {
        clearTimeout(timer)
        socket.destroy()
        done(received)
      }
    })
    socket.on('error', (err) => {
      clearTimeout(timer)
      if (received) done(received)
      else fail(err)
    })
    socket.on('close', () => {
      clearTimeout(timer)
      done(received)
    })
    socket.write(payload)
  })
}
