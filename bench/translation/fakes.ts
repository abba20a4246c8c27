// Minimal upstreams for bench/translation.ts: each answers any POST with one stream of a fixed
// number of text events in its provider's framing, built once at start and written one event
// per write: the first token, a pause of 2 ms, then the rest as fast as the socket takes them. They check nothing (test/helpers/fake-*.ts are
// the faithful fakes, held to the official SDKs); what they send is what those send on a plain
// streamed text reply: OpenAI's chunks with a usage chunk (the gateway asks for one),
// Anthropic's event sequence, Gemini's GenerateContentResponse per event, Bedrock's
// ConverseStream events in AWS's binary event-stream framing (encoded by AWS's own codec).
import http, { type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { fromUtf8, toUtf8 } from '@smithy/core/serde'

/** The text of content event i: unique, so a client finds the first one by its marker. */
export const tokenText = (i: number): string => ` Ztok${i}`
/** What a client looks for in the bytes to time the first token. */
export const FIRST_TOKEN = 'Ztok0'

export interface FakeUpstream {
  /** The API root a backend's baseUrl takes. */
  readonly url: string
  /** The streams it has answered. */
  readonly served: () => number
  close(): Promise<void>
}

/** One stream's frames, in write order: text, or bytes for a binary framing (Bedrock's event stream). */
type Frames = ReadonlyArray<string | Buffer>

const sse = (data: unknown, event?: string): string =>
  `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`

function openAIFrames(events: number): Frames {
  const head = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench' }
  const chunk = (delta: object, finish: string | null = null): string =>
    sse({ ...head, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })
  return [
    chunk({ role: 'assistant', content: '' }),
    ...Array.from({ length: events }, (_, i) => chunk({ content: tokenText(i) })),
    chunk({}, 'stop'),
    sse({ ...head, choices: [], usage: { prompt_tokens: 12, completion_tokens: events, total_tokens: 12 + events } }),
    'data: [DONE]\n\n',
  ]
}

function anthropicFrames(events: number): Frames {
  const usage = { input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
  const message = {
    id: 'msg_bench',
    type: 'message',
    role: 'assistant',
    model: 'bench',
    content: [],
    stop_reason: null,
    stop_sequence: null,
    usage,
  }
  const typed = (type: string, data: object): string => sse({ type, ...data }, type)
  return [
    typed('message_start', { message }),
    typed('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    typed('ping', {}),
    ...Array.from({ length: events }, (_, i) =>
      typed('content_block_delta', { index: 0, delta: { type: 'text_delta', text: tokenText(i) } }),
    ),
    typed('content_block_stop', { index: 0 }),
    typed('message_delta', {
      delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: events },
    }),
    typed('message_stop', {}),
  ]
}

function geminiFrames(events: number): Frames {
  // Gemini ends its events with CRLF pairs; usage comes on every event and grows.
  const event = (i: number, last: boolean): string =>
    `data: ${JSON.stringify({
      candidates: [
        {
          content: { role: 'model', parts: [{ text: tokenText(i) }] },
          index: 0,
          ...(last ? { finishReason: 'STOP' } : {}),
        },
      ],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: i + 1, totalTokenCount: 13 + i },
      modelVersion: 'bench',
      responseId: 'bench-response',
    })}\r\n\r\n`
  return Array.from({ length: events }, (_, i) => event(i, i === events - 1))
}

function bedrockFrames(events: number): Frames {
  const codec = new EventStreamCodec(toUtf8, fromUtf8)
  // Each payload padded with "p", as the service pads its events.
  const event = (type: string, payload: object): Buffer =>
    Buffer.from(
      codec.encode({
        headers: {
          ':event-type': { type: 'string', value: type },
          ':content-type': { type: 'string', value: 'application/json' },
          ':message-type': { type: 'string', value: 'event' },
        },
        body: Buffer.from(JSON.stringify({ ...payload, p: 'abcdefg' })),
      }),
    )
  return [
    event('messageStart', { role: 'assistant' }),
    ...Array.from({ length: events }, (_, i) =>
      event('contentBlockDelta', { contentBlockIndex: 0, delta: { text: tokenText(i) } }),
    ),
    event('contentBlockStop', { contentBlockIndex: 0 }),
    event('messageStop', { stopReason: 'end_turn' }),
    event('metadata', {
      usage: { inputTokens: 12, outputTokens: events, totalTokens: 12 + events },
      metrics: { latencyMs: 7 },
    }),
  ]
}

export const FRAMES = {
  openai: openAIFrames,
  anthropic: anthropicFrames,
  gemini: geminiFrames,
  bedrock: bedrockFrames,
} as const
export type UpstreamKind = keyof typeof FRAMES

/** What the last bytes of a whole stream hold, read straight from the fake. */
export const STREAM_END: Readonly<Record<UpstreamKind, string>> = {
  openai: 'data: [DONE]',
  anthropic: 'event: message_stop',
  gemini: '"finishReason":"STOP"',
  bedrock: '"totalTokens"',
}

export async function startFake(kind: UpstreamKind, events: number): Promise<FakeUpstream> {
  const frames = FRAMES[kind](events)
  const type = kind === 'bedrock' ? 'application/vnd.amazon.eventstream' : 'text/event-stream'
  let served = 0
  const server = http.createServer((req, res) => {
    // The request body is read (and dropped) before the answer, as a real upstream reads it.
    req.resume()
    req.once('end', () => {
      served++
      answer(res, frames, type)
    })
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as AddressInfo
  const root = `http://127.0.0.1:${port}`
  return {
    // Bedrock's endpoint is the origin: its paths begin /model/{modelId}/.
    url: kind === 'gemini' ? `${root}/v1beta` : kind === 'bedrock' ? root : `${root}/v1`,
    served: () => served,
    close: () =>
      new Promise((done) => {
        server.closeAllConnections()
        server.close(() => done())
      }),
  }
}

/** The pause after the first token, as a model's: the first token then reaches the gateway alone. */
const AFTER_FIRST_MS = 2

function answer(res: ServerResponse, frames: Frames, type: string): void {
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache' })
  // Each event its own write (Nagle off), as a streaming upstream sends them.
  res.socket?.setNoDelay(true)
  // Without the pause the whole stream would arrive in the gateway's first read, and the time
  // to first token would be that of translating every event, not the first.
  const first = frames.findIndex((frame) => frame.includes(FIRST_TOKEN))
  for (const frame of frames.slice(0, first + 1)) res.write(frame)
  setTimeout(() => {
    for (const frame of frames.slice(first + 1)) res.write(frame)
    res.end()
  }, AFTER_FIRST_MS)
}
