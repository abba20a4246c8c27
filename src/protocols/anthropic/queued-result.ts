// A stored (Prefer: respond-async) Messages request's result, as its caller reads it. The
// worker runs it as the chat completion it was translated into at the door and records
// the chat reply, as for any stored request; the protocol travels in the stored call
// (StoredCall.protocol, kept with the request, so a gateway started after it was accepted
// still knows), and the reply is put in Anthropic's shape when it is shown: a Message, a
// stream of Anthropic's events, or an Anthropic error at Anthropic's status. Keeping the
// chat reply as stored keeps the worker, its retries and its metering the same for every
// stored request.
import { Buffer } from 'node:buffer'
import { SseParser } from '../../proxy/sse.ts'
import type { StoredResult } from '../../queue/ports.ts'
import { anthropicErrorOfBody } from './errors.ts'
import { messageOf } from './reply-out.ts'
import { AnthropicStream } from './stream-out.ts'

const isEventStream = (contentType: string | null): boolean =>
  (contentType ?? '').split(';', 1)[0]?.trim().toLowerCase() === 'text/event-stream'

/** The result in Anthropic's shape; `requestId` (the stored request's id) names a stream's message and an error. */
export function anthropicResultOf(result: StoredResult, requestId: string): StoredResult {
  if (result.statusCode < 300) {
    if (result.encoding === 'json') return { ...result, body: messageOf(result.body) }
    if (result.encoding === 'text' && typeof result.body === 'string' && isEventStream(result.contentType))
      return { ...result, body: streamOf(result.body, requestId) }
  }
  const parsed = result.encoding === 'json' ? result.body : undefined
  // A success that is neither a message nor a stream is not something a Messages caller can read: the upstream's fault.
  const error = anthropicErrorOfBody(result.statusCode < 300 ? 502 : result.statusCode, parsed, requestId)
  return {
    ...result,
    statusCode: error.status,
    contentType: 'application/json',
    encoding: 'json',
    body: error.body,
  }
}

/** A recorded chat stream as Anthropic's event sequence, whole. */
function streamOf(text: string, requestId: string): string {
  const parser = new SseParser()
  const stream = new AnthropicStream(requestId)
  let out = ''
  for (const event of [...parser.push(Buffer.from(text)), ...parser.end()])
    if (event.data !== undefined) out += stream.data(event.data)
  return out + stream.end()
}
