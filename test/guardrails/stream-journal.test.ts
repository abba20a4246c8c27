// What a stream under reply checks tells its journal (`delivered`, keys/stream-journal.ts)
// is exactly the text the client received: the relay in front of a loopback client, its
// gate the guardrails' 256-character window. A stream blocked after some text has left
// journals only that text, never the tail the window held back; one that passes journals
// all of it, and only once each piece has been let go.
import { Readable } from 'node:stream'
import t from 'tap'
import type { UpstreamResponse } from '../../src/backends/port.ts'
import { gatewayError } from '../../src/errors.ts'
import { DETECTORS } from '../../src/guardrails/detectors.ts'
import { HOLD_CHARS, replyWindow } from '../../src/guardrails/reply-check.ts'
import { relay, type StreamGate } from '../../src/proxy/relay.ts'
import { call, startGateway } from '../proxy/gateway-harness.ts'

const chunk = (content: string): string =>
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`

/** The guardrails' window as the relay's gate: a card blocks. */
function cardGate(): StreamGate {
  const window = replyWindow([{ detector: DETECTORS.get('card')!, action: 'block' }], () => undefined)
  const passed = (out: ReturnType<typeof window.end>) =>
    typeof out === 'string' ? out : gatewayError('guardrail_blocked', { message: 'stopped' })
  return { push: (b, x) => passed(window.push(b, x)), end: () => passed(window.end()), sent: () => window.sent() }
}

/** Relays `pieces` as a stream through the gate; what the client read and what the journal was told, in order. */
async function relayed(pieces: readonly string[]): Promise<{ received: string; journalled: string[]; raw: string }> {
  const journalled: string[] = []
  const upstream: UpstreamResponse = {
    status: 200,
    headers: { 'content-type': 'text/event-stream' },
    body: Readable.from([...pieces.map(chunk), 'data: [DONE]\n\n'].map((s) => Buffer.from(s))),
  }
  const gateway = await startGateway(async (req, res) => {
    for await (const _ of req) {
      /* drain */
    }
    await relay(res, upstream, {
      stream: true,
      clientWantsUsage: false,
      promptTokens: async () => 1,
      jsonLimitBytes: 1 << 20,
      signal: new AbortController().signal,
      gate: cardGate(),
      delivered: (text) => journalled.push(text),
    })
  })
  try {
    const { body } = await call(gateway.url, { method: 'POST', body: '{}' })
    let received = ''
    for (const line of body.split('\n'))
      if (line.startsWith('data: {"id"'))
        received += (JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content: string } }> }).choices[0]!.delta
          .content
    return { received, journalled, raw: body }
  } finally {
    await gateway.close()
  }
}

t.test('a blocked stream journals what the client got, not the held-back tail', async (t) => {
  // 400 characters of prose, then a card split across events, then more: the window holds 256.
  const prose = Array.from({ length: 40 }, (_, i) => `word${String(i).padStart(4, '0')} `)
  const pieces = [...prose, 'card 4111 ', '1111 ', '1111 ', '1111 and more', ' tail']
  const out = await relayed(pieces)
  t.match(out.raw, /guardrail_blocked/, 'the stream ended with the error event')
  t.ok(out.received.length > 0, 'some text had left before the block')
  t.ok(out.received.length < prose.join('').length, 'the window held the last of the prose back')
  t.equal(out.journalled.join(''), out.received, 'the journal holds exactly what the client received')
  t.notOk(out.journalled.join('').includes('4111'))
})

t.test('a stream that passes journals all of its text, each piece once', async (t) => {
  const pieces = Array.from({ length: 60 }, (_, i) => `piece ${i}; `)
  const out = await relayed(pieces)
  t.equal(out.received, pieces.join(''))
  t.equal(out.journalled.join(''), out.received)
  t.ok(pieces.join('').length > HOLD_CHARS, 'longer than the window: some was told before the end')
  t.ok(out.journalled.length > 1, 'told as it was let go, not all at the end')
})
