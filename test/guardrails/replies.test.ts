// Reply-side guardrails (a policy's `replies:`) on a running gateway, driven through the
// openai SDK, in front of a fake upstream that streams its reply one word per event: a
// card number split across events is caught before any of it reaches the client (the
// stream is held back by a bounded window, reply-check.ts), the stream ends with an error
// event, and the audit log records the block and how much of the reply had been sent,
// never the match. A whole reply with a card is refused; a flagged e-mail passes, recorded.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { parse } from 'yaml'
import { HOLD_CHARS } from '../../src/guardrails/reply-check.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CARD = '4111 1111 1111 1111'
const EMAIL = 'erika.mustermann@example.de'
// Enough text before the card that some of it leaves before the card arrives.
const LEAD = 'Here is what I found in the records you asked me about today. '.repeat(8)

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'replies'
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = { policies: { replies: { replies: { card: 'block', email: 'flag' } } } }
  },
})
t.teardown(() => gw.stop())
const admin = { authorization: `Bearer ${gw.adminToken}` }
const { key } = await gw.createKey({ tier: 'Standard4000' })
const openai = sdkClient(gw, key)

/** A chat stream's text as the client reads it, and the error that ended it, if one did. */
async function streamed(content: string): Promise<{ received: string; failure?: unknown }> {
  const stream = await openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content }],
    stream: true,
  })
  let received = ''
  try {
    for await (const chunk of stream) received += chunk.choices[0]?.delta.content ?? ''
  } catch (failure) {
    return { received, failure }
  }
  return { received }
}

async function audit(action: string): Promise<Array<Record<string, unknown>>> {
  const res = await fetch(`${gw.url}/admin/audit?action=${action}&object_type=reply&limit=100`, { headers: admin })
  return ((await res.json()) as { data: Array<Record<string, unknown>> }).data
}

t.test('a card split across stream events never reaches the client; the stream ends with an error', async (t) => {
  upstream.options.replyText = `${LEAD}Your card is ${CARD} and it expires soon.`
  const { received, failure } = await streamed('what card?')
  t.ok(failure instanceof OpenAI.APIError, 'the stream ends with an error event')
  t.match((failure as Error).message, /guardrail policy 'replies'.*'card'.*in the model's reply/)
  t.notOk((failure as Error).message.includes('4111'), 'the error does not echo the match')
  t.notOk(received.includes('4111'), 'no part of the card was sent')
  t.ok(received.length > 0, `what came before it went out (${received.length} chars)`)
  t.ok(received.length >= LEAD.length - HOLD_CHARS - 20, 'held back by at most the window')
  t.ok(LEAD.startsWith(received), 'in order, unchanged')
  const { value: blocks } = await pollUntil(
    () => audit('guardrail.block'),
    (got) => got.length >= 1,
  )
  t.match(blocks[0], {
    object_type: 'reply',
    after: { policy: 'replies', action: 'block', findings: [{ detector: 'card', path: 'reply' }], sent_chars: Number },
  })
  const sent = (blocks[0]!.after as { sent_chars: number }).sent_chars
  t.ok(sent > 0 && sent <= LEAD.length, `sent_chars ${sent} recorded`)
  t.notOk(JSON.stringify(blocks).includes('4111'), 'the audit record holds no match')
})

t.test('a stream without a match passes whole, in order', async (t) => {
  upstream.options.replyText = `${LEAD}Nothing to hide here, order 12345.`
  const { received } = await streamed('hi')
  t.equal(received, upstream.options.replyText)
})

t.test('a whole reply with a card is refused; a flagged e-mail passes and is recorded', async (t) => {
  upstream.options.replyText = `Your card is ${CARD}.`
  try {
    await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'card?' }] })
    t.fail('not refused')
  } catch (err) {
    t.ok(err instanceof OpenAI.APIError)
    t.equal((err as InstanceType<typeof OpenAI.APIError>).status, 400)
    t.match((err as InstanceType<typeof OpenAI.APIError>).error, { code: 'guardrail_blocked' })
    t.notOk(JSON.stringify((err as InstanceType<typeof OpenAI.APIError>).error).includes('4111'))
  }
  upstream.options.replyText = `Write to ${EMAIL} please.`
  const reply = await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'who?' }] })
  t.equal(reply.choices[0]?.message.content, upstream.options.replyText, 'a flag passes untouched')
  const { received } = await streamed('who?')
  t.equal(received, upstream.options.replyText, 'streamed too')
  const { value: flags } = await pollUntil(
    () => audit('guardrail.flag'),
    (got) => got.length >= 2,
  )
  t.match(flags[0], { object_type: 'reply', after: { findings: [{ detector: 'email', action: 'flag' }] } })
  t.notOk(JSON.stringify(flags).includes(EMAIL), 'the audit record holds no match')
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_guardrail_findings_total\{policy="replies",detector="card",action="block"\} [1-9]/)
})

t.test("Anthropic Messages: a blocked stream ends with Anthropic's error event", async (t) => {
  upstream.options.replyText = `${LEAD}Your card is ${CARD} and it expires soon.`
  const anthropic = new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 })
  const stream = anthropic.messages.stream({
    model: MODEL,
    max_tokens: 400,
    messages: [{ role: 'user', content: 'what card?' }],
  })
  let received = ''
  let failure: unknown
  try {
    for await (const event of stream)
      if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') received += event.delta.text
  } catch (err) {
    failure = err
  }
  t.ok(failure instanceof Error, 'the stream ends with an error')
  t.match((failure as Error).message, /guardrail policy 'replies'/)
  t.notOk(received.includes('4111'), 'no part of the card was sent')
  t.ok(LEAD.startsWith(received) && received.length > 0, 'what came before it went out, in order')
})
