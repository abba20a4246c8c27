// The upstream of `npm run bench -- compare`: an OpenAI-compatible chat completions server
// that does as little as it can, so that what the benchmark measures is the path in front
// of it. Every reply is built once at start: a JSON completion with usage, and an SSE
// stream of TOKENS content chunks (with the usage-only chunk when the request asks for
// stream_options.include_usage, as OpenAI does). Prints {"port": N} once listening.
//
//   node bench/compare/fast-upstream.ts [--pace-ms N]
// With --pace-ms, a stream's events leave N ms apart (many streams that overlap in time).
import { createServer } from 'node:http'
import { parseArgs } from 'node:util'
import { serveChild } from './child-server.ts'

const paceMs = Number(parseArgs({ options: { 'pace-ms': { type: 'string', default: '0' } } }).values['pace-ms'])

export const TOKENS = 16
const MODEL = 'bench-chat'
const created = Math.floor(Date.now() / 1000)

const json = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created,
    model: MODEL,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'Hello there, how are you?' },
        finish_reason: 'stop',
        logprobs: null,
      },
    ],
    usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
  }),
)

function sse(withUsage: boolean): Buffer {
  const chunk = (choices: unknown[], usage?: unknown): string =>
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created, model: MODEL, choices, ...(withUsage ? { usage: usage ?? null } : {}) })}\n\n`
  const events = [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])]
  for (let i = 0; i < TOKENS; i++)
    events.push(chunk([{ index: 0, delta: { content: ` word${i}` }, finish_reason: null }]))
  events.push(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]))
  if (withUsage) events.push(chunk([], { prompt_tokens: 12, completion_tokens: TOKENS, total_tokens: 12 + TOKENS }))
  events.push('data: [DONE]\n\n')
  return Buffer.from(events.join(''))
}
const stream = { plain: sse(false), usage: sse(true) }

const server = createServer((req, res) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}')
      return
    }
    let body: { stream?: unknown; stream_options?: { include_usage?: unknown } }
    try {
      body = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof body
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad json"}}')
      return
    }
    if (body.stream === true) {
      const bytes = body.stream_options?.include_usage === true ? stream.usage : stream.plain
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      if (paceMs > 0) {
        const events = bytes.toString('utf8').split(/(?<=\n\n)/)
        const timer = setInterval(() => {
          const next = events.shift()
          if (next === undefined || res.destroyed) {
            clearInterval(timer)
            res.end()
          } else {
            res.write(next)
          }
        }, paceMs)
        return
      }
      // The first event on its own, so that time to first byte means something.
      const first = bytes.indexOf('\n\n') + 2
      res.write(bytes.subarray(0, first))
      res.end(bytes.subarray(first))
      return
    }
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': json.length }).end(json)
  })
})
serveChild(server)
