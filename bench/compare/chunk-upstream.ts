// The upstream of `node bench/chunk-cpu.ts`: an OpenAI-compatible chat completions server
// whose streams carry as many content chunks as the request's max_tokens, each event written
// on its own, one per stream every --tick-ms (one timer for all streams), so that every event
// reaches the path in front of it as a read of its own and leaves it as a write of its own:
// what that path spends per chunk is then what the bench measures. Every event is built once
// per count. Prints {"port": N} once listening.
//
//   node bench/compare/chunk-upstream.ts [--tick-ms 1]
import { createServer, type ServerResponse } from 'node:http'
import { parseArgs } from 'node:util'
import { serveChild } from './child-server.ts'

const tickMs = Number(parseArgs({ options: { 'tick-ms': { type: 'string', default: '1' } } }).values['tick-ms'])
const MODEL = 'bench-chat'
const created = Math.floor(Date.now() / 1000)

function events(tokens: number, withUsage: boolean): string[] {
  const chunk = (choices: unknown[], usage?: unknown): string =>
    `data: ${JSON.stringify({ id: 'chatcmpl-chunks', object: 'chat.completion.chunk', created, model: MODEL, choices, ...(withUsage ? { usage: usage ?? null } : {}) })}\n\n`
  const out = [chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }])]
  for (let i = 0; i < tokens; i++) out.push(chunk([{ index: 0, delta: { content: ` word${i}` }, finish_reason: null }]))
  out.push(chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]))
  if (withUsage) out.push(chunk([], { prompt_tokens: 12, completion_tokens: tokens, total_tokens: 12 + tokens }))
  out.push('data: [DONE]\n\n')
  return out
}
const built = new Map<string, string[]>()
function eventsFor(tokens: number, withUsage: boolean): string[] {
  const name = `${tokens}:${withUsage}`
  let list = built.get(name)
  if (list === undefined) built.set(name, (list = events(tokens, withUsage)))
  return list
}

/** The streams under way: their events, and how many have gone. */
const active = new Set<{ res: ServerResponse; events: string[]; at: number }>()
setInterval(() => {
  for (const stream of active) {
    if (stream.res.destroyed) {
      active.delete(stream)
      continue
    }
    const next = stream.events[stream.at++]
    if (next === undefined) {
      active.delete(stream)
      stream.res.end()
    } else {
      stream.res.write(next)
    }
  }
}, tickMs)

const server = createServer((req, res) => {
  const parts: Buffer[] = []
  req.on('data', (c: Buffer) => parts.push(c))
  req.on('end', () => {
    let body: { stream?: unknown; max_tokens?: unknown; stream_options?: { include_usage?: unknown } }
    try {
      body = JSON.parse(Buffer.concat(parts).toString('utf8')) as typeof body
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad json"}}')
      return
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions' || body.stream !== true) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"streams only"}}')
      return
    }
    const tokens = typeof body.max_tokens === 'number' ? body.max_tokens : 16
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    active.add({ res, events: eventsFor(tokens, body.stream_options?.include_usage === true), at: 0 })
  })
})
serveChild(server)
