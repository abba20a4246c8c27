// The key's limits as Anthropic's SDKs and Claude Code read them: each x-ratelimit-* triple
// the limiter wrote (limits/headers.ts) again as anthropic-ratelimit-<dimension>-{limit,
// remaining,reset}, the reset as an RFC 3339 instant rather than OpenAI's duration. The
// x-ratelimit-* headers and retry-after stay beside them.
import type { ServerResponse } from 'node:http'
import { parseDuration } from '../../limits/duration.ts'

const OPENAI = /^x-ratelimit-(limit|remaining|reset)-(requests|tokens|input-tokens|output-tokens)$/

/** Adds the anthropic-ratelimit-* twin of every x-ratelimit-* header on `res` (before its headers are sent). */
export function mirrorRateLimitHeaders(
  res: Pick<ServerResponse, 'headersSent' | 'getHeaders' | 'setHeader'>,
  now = Date.now(),
): void {
  if (res.headersSent) return
  for (const [name, value] of Object.entries(res.getHeaders())) {
    const match = OPENAI.exec(name)
    if (match === null || value === undefined) continue
    const [, part, dimension] = match
    const text = String(value)
    if (part !== 'reset') {
      res.setHeader(`anthropic-ratelimit-${dimension}-${part}`, text)
      continue
    }
    const ms = parseDuration(text)
    if (ms === null) continue
    // Whole seconds, rounded up, as Anthropic writes them: never earlier than the real reset.
    const at = new Date(Math.ceil((now + ms) / 1000) * 1000).toISOString().replace('.000Z', 'Z')
    res.setHeader(`anthropic-ratelimit-${dimension}-reset`, at)
  }
}
