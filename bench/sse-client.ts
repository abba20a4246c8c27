// A streaming chat client for the benchmarks: sends one chat completion with stream:true
// and reads the server-sent events as they arrive, timing the first content token and
// the end, and keeping every event (ids and timestamps masked) so that two paths can be
// compared event by event.
import { performance } from 'node:perf_hooks'
import { countTextTokens } from '../src/tokenizer/tokens.ts'

export interface StreamResult {
  readonly status: number
  /** performance.now() when the request was sent. */
  readonly startedAt: number
  /** From sending the request to the first event with non-empty delta content. */
  readonly ttftMs: number
  /** From sending the request to the end of the body. */
  readonly totalMs: number
  /** Every event as received, with the completion id and `created` masked. */
  readonly events: readonly string[]
  /** The content deltas joined. */
  readonly content: string
  /** countTextTokens(content): the tokens the client got, as the mock counts them. */
  readonly tokens: number
  /** Chunks with `choices: []` and a usage object. */
  readonly usageChunks: number
  /** The stream ended with `data: [DONE]`. */
  readonly done: boolean
}

export interface ChatStreamRequest {
  readonly url: string
  readonly key?: string
  readonly model: string
  readonly maxTokens: number
  readonly includeUsage?: boolean
  /** Varies the prompt; the mock's words are seeded from it. */
  readonly prompt?: string
}

/** Masks what differs between two otherwise identical streams of the mock. */
export function maskEvent(raw: string): string {
  return raw.replace(/"id":"chatcmpl-[^"]*"/g, '"id":"*"').replace(/"created":\d+/g, '"created":0')
}

export async function streamChat(request: ChatStreamRequest): Promise<StreamResult> {
  const body = JSON.stringify({
    model: request.model,
    messages: [{ role: 'user', content: request.prompt ?? 'Benchmark: stream a fixed number of tokens.' }],
    max_tokens: request.maxTokens,
    stream: true,
    ...(request.includeUsage ? { stream_options: { include_usage: true } } : {}),
  })
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (request.key !== undefined) headers.authorization = `Bearer ${request.key}`
  const startedAt = performance.now()
  const res = await fetch(request.url, { method: 'POST', headers, body })
  const events: string[] = []
  let content = ''
  let ttft = NaN
  let usageChunks = 0
  let done = false
  let pending = ''
  const decoder = new TextDecoder()
  const take = (raw: string): void => {
    events.push(maskEvent(raw))
    const data = raw.startsWith('data: ') ? raw.slice(6) : ''
    if (data === '[DONE]') {
      done = true
      return
    }
    let parsed: { choices?: Array<{ delta?: { content?: unknown } }>; usage?: unknown }
    try {
      parsed = JSON.parse(data) as typeof parsed
    } catch {
      return
    }
    if (Array.isArray(parsed.choices) && parsed.choices.length === 0 && parsed.usage) usageChunks++
    for (const choice of parsed.choices ?? []) {
      const piece = choice.delta?.content
      if (typeof piece === 'string' && piece.length > 0) {
        if (Number.isNaN(ttft)) ttft = performance.now() - startedAt
        content += piece
      }
    }
  }
  if (res.body) {
    for await (const chunk of res.body) {
      pending += decoder.decode(chunk, { stream: true })
      let end: number
      while ((end = pending.indexOf('\n\n')) !== -1) {
        take(pending.slice(0, end))
        pending = pending.slice(end + 2)
      }
    }
  }
  pending += decoder.decode()
  if (pending.trim().length > 0) take(pending.trim())
  const totalMs = performance.now() - startedAt
  return {
    status: res.status,
    startedAt,
    ttftMs: ttft,
    totalMs,
    events,
    content,
    tokens: await countTextTokens(content),
    usageChunks,
    done,
  }
}

/** Whether two event lists are the same, and where they first differ. */
export function sameEvents(a: readonly string[], b: readonly string[]): { same: boolean; at?: number } {
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return { same: false, at: i }
  return { same: true }
}
