// A fake of Google's Gemini API on loopback, written from its published reference
// (ai.google.dev/api/generate-content, ai.google.dev/gemini-api/docs/troubleshooting):
// POST /v1beta/models/{model}:generateContent (and /v1/…, where the SDK goes by default) and :streamGenerateContent?alt=sse, the key in
// x-goog-api-key (or ?key=), errors in Google's shape ({"error":{"code","message","status",
// "details"}}). Its replies are deterministic: a function call when tools are declared and
// the last turn is not a function's result, JSON matching responseSchema when JSON is asked
// for, and otherwise a sentence naming what it saw. usageMetadata is the configured one, so
// a test can tell the gateway metered what Gemini reported (thoughtsTokenCount included: a 2.5
// model thinks unasked). Asked to include its thoughts (generationConfig.thinkingConfig
// .includeThoughts), a reply opens with a thought part ({text, thought: true}), streamed a word
// per event as text is; a thinkingConfig Gemini refuses is refused as it does (a budget with a
// level, a level to a 2.5 model, an unknown level), and so is a Gemini 3 history's function
// call sent back without its thought signature. test/backends/fake-gemini-sdk.test.ts
// holds it against the official @google/genai client. It is Vertex AI too: the project's
// publisher models (/v1/projects/{p}/locations/{l}/publishers/google/models/…) for the access
// tokens its /token endpoint issues to a JWT bearer grant signed with its service account's key.
import { generateKeyPairSync } from 'node:crypto'
import http, { type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { jwtVerify } from 'jose'

export interface GeminiUsage {
  readonly promptTokenCount: number
  readonly candidatesTokenCount: number
  readonly thoughtsTokenCount?: number
  readonly cachedContentTokenCount?: number
}

export interface FakeGeminiOptions {
  /** The key it accepts; another is refused as Gemini refuses one (400 API_KEY_INVALID). */
  apiKey: string
  /** Reported on every reply (distinctive numbers, so reported is easy to tell from counted). */
  usage: GeminiUsage
  /** The text reply; streamed one word (with its trailing space) per event. */
  replyText: string
  /** Answer every request with this status and Google-shaped error body. */
  failWith?: { readonly status: number; readonly body: unknown }
  /** The finish reason of text replies. */
  finishReason: string
  /** A stream sends its first event, then nothing more until this settles. */
  holdAfterFirstEvent?: Promise<void>
  /** Vertex AI: the lifetime (seconds) of the access tokens its token endpoint issues. */
  tokenExpiresIn: number
}

export interface RecordedGeminiRequest {
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly json: Record<string, unknown>
}

export interface FakeGemini {
  /** The server's origin, as @google/genai's httpOptions.baseUrl. */
  readonly origin: string
  /** The API root with its version, as a gemini backend's baseUrl. */
  readonly apiRoot: string
  readonly options: FakeGeminiOptions
  readonly requests: RecordedGeminiRequest[]
  /** Vertex AI: a service account's key (JSON) whose token_uri is this fake's token endpoint. */
  readonly serviceAccount: string
  /** Vertex AI: the access tokens issued so far, in order. */
  readonly tokens: string[]
  /** Vertex AI: every token issued so far is revoked (refused from now on, before its expiry). */
  revokeTokens(): void
  close(): Promise<void>
}

export const FAKE_GEMINI_KEY = 'fake-gemini-key-0123456789'
export const DEFAULT_USAGE: GeminiUsage = {
  promptTokenCount: 31,
  candidatesTokenCount: 9,
  thoughtsTokenCount: 5,
  cachedContentTokenCount: 7,
}

/** Google's error body (AIP-193). */
export function googleError(code: number, status: string, message: string, details: unknown[] = []): unknown {
  return { error: { code, message, status, ...(details.length > 0 ? { details } : {}) } }
}

const PATH =
  /^\/v1(?:beta)?\/(?:projects\/[\w-]+\/locations\/[\w-]+\/publishers\/google\/)?(models\/[\w.-]+|tunedModels\/[\w.-]+):(generateContent|streamGenerateContent)$/
const SERVICE_ACCOUNT_EMAIL = 'tollgate@fake-project.iam.gserviceaccount.com'

/** What the token endpoint knows: the account's public key, and the tokens it issued (with their expiry). */
interface Vertex {
  readonly publicKey: ReturnType<typeof generateKeyPairSync>['publicKey']
  readonly issued: Map<string, number>
  readonly tokens: string[]
  tokenUrl: string
}

export async function startFakeGemini(options: Partial<FakeGeminiOptions> = {}): Promise<FakeGemini> {
  const settings: FakeGeminiOptions = {
    apiKey: FAKE_GEMINI_KEY,
    usage: DEFAULT_USAGE,
    replyText: 'Hello from the fake Gemini.',
    finishReason: 'STOP',
    tokenExpiresIn: 3599,
    ...options,
  }
  const requests: RecordedGeminiRequest[] = []
  const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const vertex: Vertex = { publicKey, issued: new Map(), tokens: [], tokenUrl: '' }
  const server = http.createServer((req, res) => {
    handle(req, res, settings, requests, vertex).catch(() => res.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  vertex.tokenUrl = `${origin}/token`
  return {
    origin,
    apiRoot: `${origin}/v1beta`,
    options: settings,
    requests,
    serviceAccount: JSON.stringify({
      type: 'service_account',
      project_id: 'fake-project',
      private_key_id: 'key-1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      client_email: SERVICE_ACCOUNT_EMAIL,
      token_uri: vertex.tokenUrl,
    }),
    tokens: vertex.tokens,
    revokeTokens: () => vertex.issued.clear(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const bytes = JSON.stringify(body)
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(bytes),
  })
  res.end(bytes)
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  options: FakeGeminiOptions,
  requests: RecordedGeminiRequest[],
  vertex: Vertex,
): Promise<void> {
  const chunks: Buffer[] = []
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk)
  const url = new URL(req.url ?? '/', 'http://fake')
  if (req.method === 'POST' && url.pathname === '/token')
    return token(res, new URLSearchParams(Buffer.concat(chunks).toString('utf8')), options, vertex)
  const match = PATH.exec(url.pathname)
  if (req.method !== 'POST' || match === null)
    return send(res, 404, googleError(404, 'NOT_FOUND', `Not found: ${url.pathname}`))
  let json: Record<string, unknown>
  try {
    json = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>
  } catch {
    return send(res, 400, googleError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received.'))
  }
  requests.push({ path: req.url ?? '', headers: req.headers, json })
  if (url.pathname.includes('/projects/')) {
    // Vertex AI: an access token its token endpoint issued and that has not expired.
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
    const expiry = bearer === undefined ? undefined : vertex.issued.get(bearer)
    if (expiry === undefined || expiry <= Date.now())
      return send(res, 401, googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.'))
  } else {
    const refusal = keyRefusal(req.headers['x-goog-api-key'] ?? url.searchParams.get('key'), options)
    if (refusal !== undefined) return send(res, refusal.status, refusal.body)
  }
  if (options.failWith !== undefined) return send(res, options.failWith.status, options.failWith.body)
  const problem = invalidRequest(json, match[1] ?? '')
  if (problem !== undefined) return send(res, 400, googleError(400, 'INVALID_ARGUMENT', problem))
  const reply = replyOf(json, options)
  const modelVersion = match[1]?.replace(/^models\//, '') ?? ''
  const usage = { ...options.usage, totalTokenCount: total(options.usage) }
  const responseId = `fake-${requests.length}`
  if (match[2] === 'generateContent')
    return send(res, 200, {
      candidates: [{ content: { role: 'model', parts: reply.parts }, finishReason: reply.finishReason, index: 0 }],
      usageMetadata: usage,
      modelVersion,
      responseId,
    })
  if (url.searchParams.get('alt') !== 'sse')
    return send(res, 400, googleError(400, 'INVALID_ARGUMENT', 'This fake streams server-sent events only (alt=sse).'))
  res.writeHead(200, { 'content-type': 'text/event-stream' })
  // Text goes a word per event; a function call comes whole, as Gemini sends one.
  const pieces = reply.parts.flatMap((part) =>
    typeof part.text === 'string' ? (part.text.match(/\S+\s*/g) ?? ['']).map((text) => ({ ...part, text })) : [part],
  )
  for (const [i, part] of pieces.entries()) {
    if (i === 1 && options.holdAfterFirstEvent !== undefined) await options.holdAfterFirstEvent
    const last = i === pieces.length - 1
    const event = {
      candidates: [
        { content: { role: 'model', parts: [part] }, index: 0, ...(last ? { finishReason: reply.finishReason } : {}) },
      ],
      // Every event carries the usage so far; the last one the whole of it.
      usageMetadata: last ? usage : { promptTokenCount: options.usage.promptTokenCount },
      modelVersion,
      responseId,
    }
    res.write(`data: ${JSON.stringify(event)}\r\n\r\n`)
  }
  res.end()
}

function keyRefusal(
  key: string | string[] | null | undefined,
  options: FakeGeminiOptions,
): { status: number; body: unknown } | undefined {
  if (key === undefined || key === null)
    return { status: 403, body: googleError(403, 'PERMISSION_DENIED', "Method doesn't allow unregistered callers.") }
  if (key === options.apiKey) return undefined
  return {
    status: 400,
    body: googleError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
      { '@type': 'type.googleapis.com/google.rpc.ErrorInfo', reason: 'API_KEY_INVALID', domain: 'googleapis.com' },
    ]),
  }
}

/** Google's token endpoint for the JWT bearer grant: a signed assertion of the account in, an access token out. */
async function token(
  res: ServerResponse,
  form: URLSearchParams,
  options: FakeGeminiOptions,
  vertex: Vertex,
): Promise<void> {
  const refuse = (description: string): void =>
    send(res, 400, { error: 'invalid_grant', error_description: description })
  if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return refuse('Invalid grant_type.')
  try {
    const { payload } = await jwtVerify(form.get('assertion') ?? '', vertex.publicKey, {
      issuer: SERVICE_ACCOUNT_EMAIL,
      audience: vertex.tokenUrl,
      algorithms: ['RS256'],
      requiredClaims: ['iat', 'exp'],
    })
    if (payload.scope !== 'https://www.googleapis.com/auth/cloud-platform') return refuse('Invalid scope.')
  } catch {
    return refuse('Invalid JWT Signature.')
  }
  const value = `ya29.fake-${vertex.tokens.length + 1}`
  vertex.tokens.push(value)
  vertex.issued.set(value, Date.now() + options.tokenExpiresIn * 1000)
  send(res, 200, { access_token: value, expires_in: options.tokenExpiresIn, token_type: 'Bearer' })
}

function total(usage: GeminiUsage): number {
  return usage.promptTokenCount + usage.candidatesTokenCount + (usage.thoughtsTokenCount ?? 0)
}

type Part = Record<string, unknown>
type Content = { role?: unknown; parts?: unknown }

/** What Gemini itself refuses with 400 INVALID_ARGUMENT, of what a translation could get wrong. */
function invalidRequest(json: Record<string, unknown>, model: string): string | undefined {
  const contents = json.contents
  if (!Array.isArray(contents) || contents.length === 0)
    return '* GenerateContentRequest.contents: contents is not specified'
  for (const [i, content] of (contents as Content[]).entries()) {
    if (content.role !== 'user' && content.role !== 'model') return `* contents[${i}].role: must be user or model`
    if (!Array.isArray(content.parts) || content.parts.length === 0)
      return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`
  }
  const config = json.generationConfig as Record<string, unknown> | undefined
  if (config?.responseSchema !== undefined && config.responseMimeType !== 'application/json')
    return '* GenerateContentRequest.generation_config.response_schema: responseMimeType must be application/json'
  // Gemini 3 wants each function call of the history back with the thought signature it came with.
  if (/gemini-([3-9]|\d{2,})/.test(model))
    for (const [i, content] of (contents as Content[]).entries())
      for (const part of content.parts as Part[]) {
        const call = part.functionCall as { name?: unknown } | undefined
        if (content.role === 'model' && call !== undefined && typeof part.thoughtSignature !== 'string')
          return `Unable to submit request because function call \`${String(call.name)}\` in the ${i + 1}. content block is missing a \`thought_signature\`.`
      }
  const thinking = config?.thinkingConfig as Record<string, unknown> | undefined
  if (thinking?.thinkingLevel !== undefined) {
    if (thinking.thinkingBudget !== undefined) return 'You can only set only one of thinking budget and thinking level.'
    if (/gemini-2\./.test(model)) return 'Thinking level is not supported for this model.'
    if (!THINKING_LEVELS.has(String(thinking.thinkingLevel).toLowerCase()))
      return `* GenerateContentRequest.generation_config.thinking_config.thinking_level: invalid value ${JSON.stringify(thinking.thinkingLevel)}`
  }
  return undefined
}

const THINKING_LEVELS = new Set(['minimal', 'low', 'medium', 'high'])

/** Whether the request asks for the model's thoughts in its reply. */
const includesThoughts = (json: Record<string, unknown>): boolean =>
  (json.generationConfig as { thinkingConfig?: { includeThoughts?: unknown } } | undefined)?.thinkingConfig
    ?.includeThoughts === true

/** The reply's thought summary, a part before the answer. */
const THOUGHT: Part = { text: 'Weighing what was asked before answering.', thought: true }

function replyOf(json: Record<string, unknown>, options: FakeGeminiOptions): { parts: Part[]; finishReason: string } {
  const reply = answerOf(json, options)
  return includesThoughts(json) ? { ...reply, parts: [THOUGHT, ...reply.parts] } : reply
}

function answerOf(json: Record<string, unknown>, options: FakeGeminiOptions): { parts: Part[]; finishReason: string } {
  const contents = json.contents as Content[]
  const lastParts = (contents.at(-1)?.parts ?? []) as Part[]
  const result = lastParts.find((p) => p.functionResponse !== undefined)?.functionResponse as
    { name: string; response: unknown } | undefined
  if (result !== undefined)
    return { parts: [{ text: `${result.name} said ${JSON.stringify(result.response)}` }], finishReason: 'STOP' }
  const tools = json.tools as Array<{ functionDeclarations?: Array<{ name: string }> }> | undefined
  const declared = tools?.[0]?.functionDeclarations?.[0]
  const mode = (json.toolConfig as { functionCallingConfig?: { mode?: string } } | undefined)?.functionCallingConfig
    ?.mode
  if (declared !== undefined && mode !== 'NONE')
    return {
      parts: [{ functionCall: { name: declared.name, args: { city: 'Paris' } }, thoughtSignature: 'c2lnbmF0dXJl' }],
      finishReason: 'STOP',
    }
  const config = json.generationConfig as Record<string, unknown> | undefined
  if (config?.responseMimeType === 'application/json')
    return { parts: [{ text: JSON.stringify(valueOf(config.responseSchema)) }], finishReason: 'STOP' }
  const images = contents
    .flatMap((c) => (c.parts ?? []) as Part[])
    .flatMap((p) => (p.inlineData === undefined ? [] : [p.inlineData as { mimeType: string; data: string }]))
  const text =
    images.length > 0
      ? `I see ${images.map((i) => `${i.mimeType} of ${Buffer.from(i.data, 'base64').length} bytes`).join(', ')}.`
      : options.replyText
  return { parts: [{ text }], finishReason: options.finishReason }
}

/** A value of Gemini's Schema. */
function valueOf(schema: unknown): unknown {
  const s = (schema ?? {}) as { type?: string; properties?: Record<string, unknown>; enum?: unknown[] }
  if (s.enum !== undefined) return s.enum[0]
  switch (s.type) {
    case 'OBJECT':
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, valueOf(v)]))
    case 'ARRAY':
      return []
    case 'STRING':
      return 'text'
    case 'NUMBER':
    case 'INTEGER':
      return 42
    case 'BOOLEAN':
      return true
    default:
      return {}
  }
}
