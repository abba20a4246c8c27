// An OpenAI-compatible chat upstream that holds every call until the test lets it go: a
// deployment's in-flight slots stay taken exactly as long as a test wants, with no timing.
// Each call is answered with a short chat completion when released, in the order they came.
import http, { type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface GatedUpstream {
  /** Base URL with the version path, as a backend's baseUrl. */
  readonly url: string
  /** The last user message of each call received, in the order they came. */
  readonly received: string[]
  /** Calls held now. */
  held(): number
  /** Resolves once `n` calls in all have been received; rejects, saying what came, if they have not within `ms`. */
  arrived(n: number, ms?: number): Promise<void>
  /** Answers the `n` oldest held calls (all when absent). */
  release(n?: number): void
  close(): Promise<void>
}

export async function startGatedUpstream(): Promise<GatedUpstream> {
  const received: string[] = []
  const held: Array<{ res: ServerResponse; model: string }> = []
  const waiting: Array<{ n: number; done: () => void }> = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body: { model?: string; messages?: Array<{ content?: unknown }> } = {}
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body
      } catch {
        // not JSON: answered all the same
      }
      const last = body.messages?.at(-1)?.content
      received.push(typeof last === 'string' ? last : '')
      held.push({ res, model: body.model ?? 'gated' })
      for (const w of waiting.filter((w) => received.length >= w.n)) {
        waiting.splice(waiting.indexOf(w), 1)
        w.done()
      }
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const { port } = server.address() as AddressInfo
  const answer = ({ res, model }: { res: ServerResponse; model: string }): void => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(
      JSON.stringify({
        id: 'chatcmpl-gated',
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model,
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 },
      }),
    )
  }
  return {
    url: `http://127.0.0.1:${port}/v1`,
    received,
    held: () => held.length,
    arrived: (n, ms = 20_000) =>
      received.length >= n
        ? Promise.resolve()
        : new Promise<void>((done, fail) => {
            const timer = setTimeout(() => {
              waiting.splice(waiting.indexOf(entry), 1)
              fail(new Error(`${received.length} calls arrived, not ${n}, in ${ms} ms: ${received.join(', ')}`))
            }, ms)
            const entry = {
              n,
              done: () => {
                clearTimeout(timer)
                done()
              },
            }
            waiting.push(entry)
          }),
    release(n = held.length) {
      for (const call of held.splice(0, n)) answer(call)
    },
    async close() {
      for (const call of held.splice(0)) answer(call)
      server.closeAllConnections()
      await new Promise<void>((done) => server.close(() => done()))
    },
  }
}
