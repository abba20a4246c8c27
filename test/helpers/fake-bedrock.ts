// A fake of Amazon Bedrock Runtime on loopback, written from AWS's published API reference
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html and
// API_runtime_ConverseStream.html, the SigV4 and event-stream chapters of the AWS general
// reference): POST /model/{modelId}/converse and /model/{modelId}/converse-stream, the latter
// answered in AWS's binary event-stream framing (application/vnd.amazon.eventstream, encoded
// by AWS's own codec) with messageStart, contentBlockStart/Delta/Stop, messageStop and
// metadata events, and exceptions inside the stream as the service sends them. Every request
// must carry a SigV4 Authorization header that this fake recomputes with AWS's signer for its
// known test credentials: a missing one, an unknown key id or session token, and a bad
// signature are refused with 403 and the exception names AWS's front door uses. Errors carry
// their name in x-amzn-errortype and {"message": …} as the body.
//
// Replies are deterministic: a toolUse when tools are declared and the last turn is not a
// tool's result, "<tool> said <result>" after one, "I see <format> of N bytes." for an image,
// JSON matching the schema for structured output, reasoningContent (signed) first when
// additionalModelRequestFields.thinking enables it, and otherwise the configured text. The
// usage is the configured one, so a test can tell the gateway metered what Bedrock reported.
// test/backends/fake-bedrock-sdk.test.ts holds it against the official
// @aws-sdk/client-bedrock-runtime client.
import { randomUUID } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import http2 from 'node:http2'
import net, { type AddressInfo, type Socket } from 'node:net'
import { duplexPair } from 'node:stream'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { fromUtf8, Hash, toUtf8 } from '@smithy/core/serde'
import { SignatureV4 } from '@smithy/signature-v4'

export interface BedrockUsage {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly cacheReadInputTokens?: number
  readonly cacheWriteInputTokens?: number
}

export interface FakeAwsCredentials {
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly sessionToken?: string
}

export interface FakeBedrockOptions {
  /** The credentials whose signatures it accepts. */
  credentials: FakeAwsCredentials
  region: string
  /** Reported on every reply (distinctive numbers, so reported is easy to tell from counted). */
  usage: BedrockUsage
  /** The text reply; streamed one word (with its trailing space) per contentBlockDelta. */
  replyText: string
  /** The stopReason of text replies. */
  stopReason: string
  /** Answer every request with this status, exception name (x-amzn-errortype) and message. */
  failWith?: { readonly status: number; readonly type: string; readonly message: string }
  /** A stream sends `afterEvents` events, then this exception (e.g. throttlingException) and ends. */
  streamFailWith?: { readonly exceptionType: string; readonly message: string; readonly afterEvents: number }
  /** A stream sends its first events, up to the first text delta, then nothing more until this settles. */
  holdAfterFirstEvent?: Promise<void>
}

export interface RecordedBedrockRequest {
  readonly path: string
  readonly modelId: string
  readonly operation: 'converse' | 'converse-stream'
  readonly headers: http.IncomingHttpHeaders
  readonly json: Record<string, unknown>
}

export interface FakeBedrock {
  /** The endpoint, as the SDK's `endpoint` and a bedrock backend's `endpoint`. */
  readonly origin: string
  readonly options: FakeBedrockOptions
  /** Requests that passed the signature check. */
  readonly requests: RecordedBedrockRequest[]
  /** Requests refused for their signature or credentials. */
  readonly refused: string[]
  close(): Promise<void>
}

export const FAKE_AWS_CREDENTIALS: FakeAwsCredentials = {
  accessKeyId: 'AKIAFAKEBEDROCK00001',
  secretAccessKey: 'fake/secret/access/key/for/bedrock/tests0',
  sessionToken: 'fake-session-token-0123456789',
}
export const DEFAULT_USAGE: BedrockUsage = {
  inputTokens: 23,
  outputTokens: 11,
  cacheReadInputTokens: 13,
  cacheWriteInputTokens: 5,
}
/** The signature on the reasoning this fake returns, which a caller sends back on its next turn. */
export const FAKE_REASONING_SIGNATURE = 'ZmFrZS1iZWRyb2NrLXNpZ25hdHVyZQ=='
export const FAKE_REASONING = 'Let me think about it.'

const PATH = /^\/model\/([^/]+)\/(converse|converse-stream)$/
const codec = new EventStreamCodec(toUtf8, fromUtf8)
const FIFTEEN_MINUTES = 15 * 60 * 1000

type Json = Record<string, unknown>
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value)

export async function startFakeBedrock(options: Partial<FakeBedrockOptions> = {}): Promise<FakeBedrock> {
  const settings: FakeBedrockOptions = {
    credentials: FAKE_AWS_CREDENTIALS,
    region: 'us-east-1',
    usage: DEFAULT_USAGE,
    replyText: 'Hello from the fake Bedrock.',
    stopReason: 'end_turn',
    ...options,
  }
  const requests: RecordedBedrockRequest[] = []
  const refused: string[] = []
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res, settings, requests, refused).catch(() => res.destroy())
  }
  // Bedrock Runtime speaks HTTP/1.1 and HTTP/2 (AWS's SDK for JavaScript uses HTTP/2, the
  // gateway HTTP/1.1): in cleartext the two are told apart by HTTP/2's connection preface.
  const h1 = http.createServer(handler)
  const h2 = http2.createServer(handler as unknown as Parameters<typeof http2.createServer>[0])
  const sockets = new Set<Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
    socket.once('data', (first) => {
      socket.pause()
      if (!first.toString('latin1').startsWith('PRI * HTTP/2')) {
        socket.unshift(first)
        h1.emit('connection', socket)
        socket.resume()
        return
      }
      // An HTTP/2 session reads its socket's handle, past anything unshifted: it gets a pipe instead.
      const [inner, outer] = duplexPair()
      h2.emit('connection', inner)
      outer.write(first)
      socket.pipe(outer).pipe(socket)
      socket.once('close', () => outer.destroy())
      outer.once('close', () => socket.destroy())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    origin,
    options: settings,
    requests,
    refused,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        h1.close()
        h2.close()
        server.close(() => resolve())
      }),
  }
}

/** AWS's error answer: the status, the exception's name in x-amzn-errortype, {"message"} as the body. */
function fail(res: ServerResponse, status: number, type: string, message: string): void {
  const body = JSON.stringify({ message })
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-amzn-requestid': randomUUID(),
    'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/`,
  })
  res.end(body)
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  settings: FakeBedrockOptions,
  requests: RecordedBedrockRequest[],
  refused: string[],
): Promise<void> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const bytes = Buffer.concat(chunks)
  const path = req.url ?? '/'
  const match = PATH.exec(path)
  if (req.method !== 'POST' || match === null) {
    fail(res, 404, 'UnknownOperationException', 'Unknown operation')
    return
  }
  const denied = await signatureRefusal(req, path, bytes, settings)
  if (denied !== undefined) {
    refused.push(denied.type)
    fail(res, 403, denied.type, denied.message)
    return
  }
  let json: unknown
  try {
    json = JSON.parse(bytes.toString('utf8'))
  } catch {
    fail(res, 400, 'SerializationException', 'Start of structure or map found where not expected.')
    return
  }
  if (!isObject(json)) {
    fail(res, 400, 'SerializationException', 'Start of structure or map found where not expected.')
    return
  }
  const operation = match[2] as 'converse' | 'converse-stream'
  const modelId = decodeURIComponent(match[1] ?? '')
  requests.push({ path, modelId, operation, headers: req.headers, json })
  if (settings.failWith !== undefined) {
    fail(res, settings.failWith.status, settings.failWith.type, settings.failWith.message)
    return
  }
  const invalid = validationError(json)
  if (invalid !== undefined) {
    fail(res, 400, 'ValidationException', invalid)
    return
  }
  const reply = replyOf(json, settings)
  if (operation === 'converse') {
    const body = JSON.stringify({
      output: { message: { role: 'assistant', content: reply.blocks } },
      stopReason: reply.stopReason,
      usage: usageOf(settings.usage),
      metrics: { latencyMs: 7 },
    })
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'x-amzn-requestid': randomUUID(),
    })
    res.end(body)
    return
  }
  await stream(res, reply, settings)
}

/** Why the request's SigV4 signature is refused (AWS's exception name and message), or undefined when it is good. */
async function signatureRefusal(
  req: IncomingMessage,
  path: string,
  body: Buffer,
  settings: FakeBedrockOptions,
): Promise<{ type: string; message: string } | undefined> {
  const authorization = req.headers.authorization ?? ''
  const parsed =
    /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
      authorization,
    )
  if (parsed === null) return { type: 'MissingAuthenticationTokenException', message: 'Missing Authentication Token' }
  const [, keyId, , region, service, signedHeaders, signature] = parsed as unknown as string[]
  const credentials = settings.credentials
  const token = req.headers['x-amz-security-token']
  if (keyId !== credentials.accessKeyId || (token ?? undefined) !== credentials.sessionToken)
    return { type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' }
  if (region !== settings.region || service !== 'bedrock')
    return {
      type: 'InvalidSignatureException',
      message: `Credential should be scoped to a valid region and to the service bedrock, not '${region}/${service}'.`,
    }
  const amzDate = String(req.headers['x-amz-date'] ?? '')
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate)
  if (date === null) return { type: 'IncompleteSignatureException', message: 'Date must be in ISO-8601 basic format.' }
  const signedAt = Date.UTC(+date[1]!, +date[2]! - 1, +date[3]!, +date[4]!, +date[5]!, +date[6]!)
  if (Math.abs(Date.now() - signedAt) > FIFTEEN_MINUTES)
    return { type: 'InvalidSignatureException', message: 'Signature expired.' }
  // The same request, with only the headers the client signed, signed again with the known secret.
  const headers: Record<string, string> = {}
  for (const name of (signedHeaders ?? '').split(';')) {
    const value = req.headers[name]
    if (value === undefined)
      return { type: 'IncompleteSignatureException', message: `Signed header ${name} is missing.` }
    headers[name] = Array.isArray(value) ? value.join(',') : value
  }
  const signer = new SignatureV4({
    service: 'bedrock',
    region: settings.region,
    credentials,
    sha256: Hash.bind(null, 'sha256'),
    applyChecksum: false,
  })
  const host = headers.host ?? ''
  const expected = await signer.sign(
    { method: 'POST', protocol: 'http:', hostname: host.split(':')[0] ?? '', path, query: {}, headers, body },
    { signingDate: new Date(signedAt) },
  )
  const expectedSignature = /Signature=([0-9a-f]{64})/.exec(String(expected.headers.authorization))?.[1]
  if (expectedSignature !== signature)
    return {
      type: 'InvalidSignatureException',
      message:
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    }
  return undefined
}

/** What the service refuses before any model sees the request (a few of its documented checks). */
function validationError(json: Json): string | undefined {
  const messages = json.messages
  if (!Array.isArray(messages) || messages.length === 0)
    return 'A conversation must start with a user message. Try again with a conversation that starts with a user message.'
  let previous = ''
  for (const message of messages as unknown[]) {
    if (!isObject(message) || (message.role !== 'user' && message.role !== 'assistant'))
      return 'Malformed input request, please reformat your input and try again.'
    if (previous === '' && message.role !== 'user')
      return 'A conversation must start with a user message. Try again with a conversation that starts with a user message.'
    if (message.role === previous)
      return 'A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.'
    previous = message.role
    for (const block of Array.isArray(message.content) ? (message.content as unknown[]) : []) {
      if (
        isObject(block) &&
        (block.toolUse !== undefined || block.toolResult !== undefined) &&
        json.toolConfig === undefined
      )
        return 'The toolConfig field must be defined when using toolUse and toolResult content blocks.'
    }
  }
  return undefined
}

interface Reply {
  readonly blocks: Json[]
  readonly stopReason: string
}

function replyOf(json: Json, settings: FakeBedrockOptions): Reply {
  const messages = json.messages as Json[]
  const last = messages.at(-1)
  const content = Array.isArray(last?.content) ? (last.content as Json[]) : []
  const blocks: Json[] = []
  const extra = isObject(json.additionalModelRequestFields) ? json.additionalModelRequestFields : {}
  if (isObject(extra.thinking) && extra.thinking.type === 'enabled')
    blocks.push({ reasoningContent: { reasoningText: { text: FAKE_REASONING, signature: FAKE_REASONING_SIGNATURE } } })
  const result = content.find((b) => isObject(b.toolResult))?.toolResult as Json | undefined
  const tools =
    isObject(json.toolConfig) && Array.isArray(json.toolConfig.tools) ? (json.toolConfig.tools as Json[]) : []
  if (tools.length > 0 && result === undefined) {
    const choice = isObject(json.toolConfig) && isObject(json.toolConfig.toolChoice) ? json.toolConfig.toolChoice : {}
    const spec = (
      isObject(choice.tool)
        ? tools.find((t) => isObject(t.toolSpec) && t.toolSpec.name === (choice.tool as Json).name)?.toolSpec
        : tools[0]?.toolSpec
    ) as Json
    const schema = isObject(spec.inputSchema) ? spec.inputSchema.json : {}
    blocks.push({
      toolUse: { toolUseId: `tooluse_${randomUUID().slice(0, 22)}`, name: spec.name, input: valueOf(schema) },
    })
    return { blocks, stopReason: 'tool_use' }
  }
  if (result !== undefined) {
    const id = result.toolUseId
    const name = messages
      .flatMap((m) => (Array.isArray(m.content) ? (m.content as Json[]) : []))
      .map((b) => b.toolUse as Json | undefined)
      .find((u) => u?.toolUseId === id)?.name
    const said = (Array.isArray(result.content) ? (result.content as Json[]) : [])
      .map((c) => (typeof c.text === 'string' ? c.text : JSON.stringify(c.json)))
      .join('')
    blocks.push({ text: `${String(name)} said ${said}` })
    return { blocks, stopReason: 'end_turn' }
  }
  const image = content.find((b) => isObject(b.image))?.image as Json | undefined
  if (image !== undefined) {
    const source = isObject(image.source) ? image.source : {}
    const size = Buffer.from(String(source.bytes), 'base64').length
    blocks.push({ text: `I see ${String(image.format)} of ${size} bytes.` })
    return { blocks, stopReason: 'end_turn' }
  }
  const format =
    isObject(json.outputConfig) && isObject(json.outputConfig.textFormat) ? json.outputConfig.textFormat : undefined
  if (format !== undefined && isObject(format.structure) && isObject(format.structure.jsonSchema)) {
    const schema: unknown = JSON.parse(String(format.structure.jsonSchema.schema))
    blocks.push({ text: JSON.stringify(valueOf(schema)) })
    return { blocks, stopReason: 'end_turn' }
  }
  blocks.push({ text: settings.replyText })
  return { blocks, stopReason: settings.stopReason }
}

/** A value matching a JSON schema: strings "Paris" for a city and "text" otherwise, integers 42, booleans true. */
function valueOf(schema: unknown, name = ''): unknown {
  if (!isObject(schema)) return null
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type
  switch (type) {
    case 'object': {
      const out: Json = {}
      const properties = isObject(schema.properties) ? schema.properties : {}
      for (const [key, value] of Object.entries(properties)) out[key] = valueOf(value, key)
      return out
    }
    case 'array':
      return [valueOf(schema.items)]
    case 'integer':
    case 'number':
      return 42
    case 'boolean':
      return true
    default:
      return name === 'city' ? 'Paris' : 'text'
  }
}

function usageOf(usage: BedrockUsage): Json {
  return {
    ...usage,
    totalTokens:
      usage.inputTokens + usage.outputTokens + (usage.cacheReadInputTokens ?? 0) + (usage.cacheWriteInputTokens ?? 0),
  }
}

/** One event-stream message, as the service frames it (its payloads padded with "p", as the real ones are). */
function event(type: string, payload: Json): Uint8Array {
  return codec.encode({
    headers: {
      ':event-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'event' },
    },
    body: Buffer.from(JSON.stringify({ ...payload, p: 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ'.slice(0, 7) })),
  })
}

function exception(type: string, message: string): Uint8Array {
  return codec.encode({
    headers: {
      ':exception-type': { type: 'string', value: type },
      ':content-type': { type: 'string', value: 'application/json' },
      ':message-type': { type: 'string', value: 'exception' },
    },
    body: Buffer.from(JSON.stringify({ message })),
  })
}

/** The events of a reply: reasoning, text word by word, a tool call's input in two pieces. */
function eventsOf(reply: Reply, usage: BedrockUsage): Array<{ bytes: Uint8Array; text: boolean }> {
  const out: Array<{ bytes: Uint8Array; text: boolean }> = []
  const push = (type: string, payload: Json, text = false): void => {
    out.push({ bytes: event(type, payload), text })
  }
  push('messageStart', { role: 'assistant' })
  reply.blocks.forEach((block, index) => {
    if (isObject(block.reasoningContent)) {
      const reasoning = block.reasoningContent.reasoningText as Json
      push('contentBlockDelta', { contentBlockIndex: index, delta: { reasoningContent: { text: reasoning.text } } })
      push('contentBlockDelta', {
        contentBlockIndex: index,
        delta: { reasoningContent: { signature: reasoning.signature } },
      })
    } else if (isObject(block.toolUse)) {
      const use = block.toolUse
      push('contentBlockStart', {
        contentBlockIndex: index,
        start: { toolUse: { toolUseId: use.toolUseId, name: use.name } },
      })
      const input = JSON.stringify(use.input)
      const half = Math.floor(input.length / 2)
      for (const piece of [input.slice(0, half), input.slice(half)])
        push('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: piece } } })
    } else {
      for (const word of String(block.text).match(/\S+\s*/g) ?? [])
        push('contentBlockDelta', { contentBlockIndex: index, delta: { text: word } }, true)
    }
    push('contentBlockStop', { contentBlockIndex: index })
  })
  push('messageStop', { stopReason: reply.stopReason })
  push('metadata', { usage: usageOf(usage), metrics: { latencyMs: 7 } })
  return out
}

async function stream(res: ServerResponse, reply: Reply, settings: FakeBedrockOptions): Promise<void> {
  res.writeHead(200, {
    'content-type': 'application/vnd.amazon.eventstream',
    'x-amzn-requestid': randomUUID(),
  })
  const events = eventsOf(reply, settings.usage)
  const failure = settings.streamFailWith
  const hold = settings.holdAfterFirstEvent
  let held = false
  for (const [i, next] of events.entries()) {
    if (failure !== undefined && i === failure.afterEvents) {
      res.end(exception(failure.exceptionType, failure.message))
      return
    }
    res.write(next.bytes)
    if (hold !== undefined && next.text && !held) {
      held = true
      await hold
    }
  }
  res.end()
}
