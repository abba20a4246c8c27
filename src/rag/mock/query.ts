// query-pipeline: a chat query answered as JSON, or as an SSE stream of answer tokens
// followed by the sources (POST /api/v1/query with "stream": true, or Accept: text/event-stream).
// POST /api/v1/chat {sessionId, userPrompt} is the provider's guides' call; the mock's earlier
// spellings ({query} or {message}, session_id) are read too. Answers name the session `sessionId`.
import { setTimeout as sleep } from 'node:timers/promises'
import { mockId, readJson, receivedIdentity, reply, detail, type MockExchange } from './reply.ts'

function answerTo(query: string): { tokens: string[]; sources: Array<Record<string, unknown>> } {
  const text = `This is a mock answer from the Tollgate RAG mock to: ${query.slice(0, 200)}`
  const tokens = text.split(/(?<= )/)
  const sources = [1, 2].map((n) => ({
    id: mockId('src', query, String(n)),
    title: `Mock source ${n}`,
    file: `mock-document-${n}.pdf`,
    page: n,
    score: 1 / (n + 1),
  }))
  return { tokens, sources }
}

function firstString(...values: readonly unknown[]): string | null {
  for (const v of values) if (typeof v === 'string') return v
  return null
}

export function createQueryService(tokenDelayMs: number): (x: MockExchange) => Promise<boolean> {
  return async (x) => {
    if (!/^\/api\/v1\/(query|chat)\/?$/.test(x.path) || x.req.method !== 'POST') return false
    const body = await readJson(x.req)
    const query = firstString(body.userPrompt, body.query, body.message) ?? ''
    if (query === '') {
      detail(x, 422, 'userPrompt is required (mock)')
      return true
    }
    const sessionId = firstString(body.sessionId, body.session_id)
    const { tokens, sources } = answerTo(query)
    const wantsStream = body.stream === true || (x.req.headers.accept ?? '').includes('text/event-stream')
    if (!wantsStream) {
      reply(x, 200, { sessionId, answer: tokens.join(''), sources })
      return true
    }
    x.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
    x.res.flushHeaders()
    const closed = new AbortController()
    x.res.once('close', () => closed.abort())
    for (const [index, token] of tokens.entries()) {
      if (closed.signal.aborted) return true
      x.res.write(`event: token\ndata: ${JSON.stringify({ index, token })}\n\n`)
      if (tokenDelayMs > 0) await sleep(tokenDelayMs, undefined, { signal: closed.signal }).catch(() => undefined)
    }
    if (closed.signal.aborted) return true
    x.res.write(`event: sources\ndata: ${JSON.stringify({ sources })}\n\n`)
    x.res.end(`event: done\ndata: ${JSON.stringify({ sessionId, mock: true, identity: receivedIdentity(x.req) })}\n\n`)
    return true
  }
}
