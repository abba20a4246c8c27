// The adapter for Amazon Bedrock's Converse API (bedrock-runtime.{region}.amazonaws.com): a
// chat completion call goes out as `POST /model/{modelId}/converse` (or `/converse-stream`
// when it streams), signed with SigV4 (sign.ts), and its answer comes back in OpenAI's wire
// format, so the relay, its usage tap, failover and capacity treat it as any other upstream's.
// The translations are one file per direction: the request out (request-out.ts), the reply
// in (reply-in.ts), the stream in (stream-in.ts: AWS's binary event-stream framing, event by
// event, unbuffered) and the errors in (errors-in.ts). This file carries the bytes: its own
// request (nothing of the client's headers reaches AWS), timeouts, and every way the
// connection can fail as the GatewayError failover expects. The deployment's `model` is the
// Bedrock model id (anthropic.claude-…-v1:0), an inference profile's id or its ARN.
import { pipeline, Readable } from 'node:stream'
import type { BedrockBackendConfig } from '../../config/schema.ts'
import { gatewayError } from '../../errors.ts'
import { mediaType } from '../../http/media-type.ts'
import { readAll, translatedWhole } from '../http/read-body.ts'
import { sendUpstream, upstreamConnection } from '../http/send.ts'
import { watchBody } from '../http/watch-body.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../port.ts'
import { bedrockErrorOf, type TranslatedError } from './errors-in.ts'
import { chatCompletionOf } from './reply-in.ts'
import { converseRequestOf } from './request-out.ts'
import { createSigner, type AwsCredentials } from './sign.ts'
import { ChatStreamTransform, EventStreamReader, headerOf, type Message } from './stream-in.ts'

/** How much of an error body is read to translate it. */
const ERROR_BODY_BYTES = 64 * 1024
/** A whole (non-streamed) reply larger than this is not a chat completion. */
const REPLY_BYTES = 64 * 1024 * 1024
const EVENT_STREAM = 'application/vnd.amazon.eventstream'

export function createBedrockBackend(
  name: string,
  config: BedrockBackendConfig,
  credentials: AwsCredentials | undefined,
): BackendAdapter {
  const root = (config.endpoint ?? `https://bedrock-runtime.${config.region}.amazonaws.com`).replace(/\/+$/, '')
  const connection = upstreamConnection(root, config)
  const signer = createSigner(config.region, credentials)

  async function send(request: UpstreamRequest): Promise<UpstreamResponse> {
    if (request.endpoint !== 'chat.completions' || request.body.kind !== 'json')
      throw gatewayError('untranslatable_feature', {
        message: `${request.endpoint} is not supported by this model's upstream, which speaks Amazon Bedrock's Converse API.`,
      })
    const chat = request.body.value
    const model = request.model ?? String(chat.model)
    const stream = chat.stream === true
    const bytes = Buffer.from(JSON.stringify(converseRequestOf(chat)), 'utf8')
    // The model id is one path segment: its colons and an ARN's slashes are escaped, as AWS's SDKs do.
    const url = new URL(`${root}/model/${encodeURIComponent(model)}/${stream ? 'converse-stream' : 'converse'}`)
    const headers = await signer.sign(
      url,
      {
        ...config.headers,
        'content-type': 'application/json',
        'content-length': String(bytes.length),
        accept: stream ? EVENT_STREAM : 'application/json',
        'accept-encoding': 'identity',
        'x-request-id': request.requestId,
        ...request.trace,
      },
      bytes,
    )
    const upstream = await sendUpstream(connection, url, headers, bytes, request)
    const status = upstream.statusCode ?? 502
    const errorType = upstream.headers['x-amzn-errortype']
    const body = watchBody(upstream, config.idleTimeoutMs, request.signal)
    if (status >= 400) {
      const text = (await readAll(body, ERROR_BODY_BYTES, true)).toString('utf8')
      return errorReply(bedrockErrorOf(status, typeof errorType === 'string' ? errorType : undefined, text))
    }
    const created = Math.floor(Date.now() / 1000)
    if (stream && mediaType(upstream.headers['content-type'] ?? '') === EVENT_STREAM)
      return streamReply(body, model, created)
    return {
      status,
      headers: { 'content-type': 'application/json' },
      body: Readable.from(translatedWhole(body, REPLY_BYTES, (reply) => chatCompletionOf(reply, model, created))),
    }
  }

  return {
    name,
    type: 'bedrock',
    supports: (endpoint) => endpoint === 'chat.completions',
    send,
    async close() {
      connection.agent.destroy()
    },
  }
}

/**
 * A ConverseStream's reply. Its first message is read before answering: a stream that opens
 * with an exception (throttlingException, serviceUnavailableException) is the refusal it
 * names, answered at its status so that capacity learns it and the call fails over, as it
 * would had Bedrock said so in the status line. Every later message goes out as it comes.
 */
async function streamReply(body: Readable, model: string, created: number): Promise<UpstreamResponse> {
  const reader = new EventStreamReader()
  const first = await firstMessages(body, reader)
  const opening = first.messages[0]
  if (opening !== undefined && headerOf(opening, ':message-type') === 'exception') {
    body.destroy()
    const type = headerOf(opening, ':exception-type') ?? 'internalServerException'
    const name = type.charAt(0).toUpperCase() + type.slice(1)
    return errorReply(bedrockErrorOf(500, name, Buffer.from(opening.body).toString('utf8')))
  }
  const events = new ChatStreamTransform(model, created, reader, first.messages)
  events.on('error', () => undefined)
  if (first.ended) events.end()
  // Errors travel both ways: an upstream failure ends the stream with it, a client gone destroys the upstream's.
  else pipeline(body, events, () => undefined)
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: events }
}

/** Reads the body until a whole message is in (or it ends), then pauses it. */
function firstMessages(body: Readable, reader: EventStreamReader): Promise<{ messages: Message[]; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const cleanup = (): void => {
      body.off('data', onData)
      body.off('end', onEnd)
      body.off('error', onError)
    }
    const onData = (chunk: Buffer): void => {
      let messages: Message[]
      try {
        messages = reader.push(chunk)
      } catch (err) {
        cleanup()
        body.destroy()
        reject(gatewayError('upstream_bad_response', { cause: err }))
        return
      }
      if (messages.length === 0) return
      cleanup()
      body.pause()
      resolve({ messages, ended: false })
    }
    const onEnd = (): void => {
      cleanup()
      resolve({ messages: [], ended: true })
    }
    const onError = (err: Error): void => {
      cleanup()
      reject(err)
    }
    body.on('data', onData)
    body.once('end', onEnd)
    body.once('error', onError)
  })
}

/** A translated error as the corridor reads one: a refused credential bodiless (it answers upstream_auth_failed). */
function errorReply(error: TranslatedError): UpstreamResponse {
  if (error.status === 401 || error.status === 403)
    return { status: error.status, headers: {}, body: Readable.from([]) }
  return {
    status: error.status,
    headers: { 'content-type': 'application/json' },
    body: Readable.from([Buffer.from(JSON.stringify(error.body))]),
  }
}
