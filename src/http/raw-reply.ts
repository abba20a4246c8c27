// An error reply written straight to a socket, for the moments before there is a request
// to answer (a connection over the cap, bytes that are not HTTP): the same OpenAI-shaped
// body as every other refusal, and the connection closes after it.
import { http } from './node-http.ts'
import type { GatewayError } from '../errors.ts'

export function rawErrorReply(error: GatewayError): Buffer {
  const body = JSON.stringify(error.toBody())
  const head = [
    `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status] ?? 'Error'}`,
    'content-type: application/json; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'connection: close',
    ...Object.entries(error.headers)
      .filter(([name]) => name.toLowerCase() !== 'connection')
      .map(([name, value]) => `${name}: ${value}`),
  ]
  return Buffer.from(`${head.join('\r\n')}\r\n\r\n${body}`)
}
