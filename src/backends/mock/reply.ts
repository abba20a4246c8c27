// Response bodies in the three shapes the mock answers with: JSON, plain text, and
// server-sent events (the stream itself comes from sse.ts).
import { Readable } from 'node:stream'
import type { UpstreamResponse } from '../port.ts'

export function jsonResponse(
  status: number,
  value: unknown,
  headers: Readonly<Record<string, string>> = {},
): UpstreamResponse {
  return bytesResponse(status, 'application/json', JSON.stringify(value), headers)
}

export function textResponse(text: string): UpstreamResponse {
  return bytesResponse(200, 'text/plain; charset=utf-8', text)
}

export function eventStreamResponse(body: Readable): UpstreamResponse {
  return { status: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8' }, body }
}

function bytesResponse(
  status: number,
  contentType: string,
  text: string,
  headers: Readonly<Record<string, string>> = {},
): UpstreamResponse {
  const bytes = Buffer.from(text, 'utf8')
  return {
    status,
    headers: { ...headers, 'content-type': contentType, 'content-length': String(bytes.length) },
    body: Readable.from([bytes]),
  }
}
