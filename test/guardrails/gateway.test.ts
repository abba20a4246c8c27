// Guardrails on a running gateway, driven through the official openai and Anthropic SDKs,
// in front of a fake upstream that records what it received: a `block` is refused with
// guardrail_blocked before anything reaches the upstream (in each caller's protocol's
// shape), a `mask` reaches it masked, a `flag` passes and is recorded; a key's own policy
// makes its tier's stricter and never looser; the audit log, the metrics and the events
// say which detector and where, never the matched text.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { fieldBodies } from './field-bodies.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const EMBEDDING = 'jina-embeddings-v2-base-de'
const CARD = '4111 1111 1111 1111'
const EMAIL = 'erika.mustermann@example.de'
const IBAN = 'DE89 3704 0044 0532 0130 00'
const TAX_ID = '86095742719'
const SECRETS = [CARD, CARD.replaceAll(' ', ''), EMAIL, IBAN, IBAN.replaceAll(' ', ''), TAX_ID]

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'gdpr'
const guardrails = {
  policies: {
    gdpr: {
      detectors: { email: 'mask', iban: 'mask', card: 'block', de_tax_id: 'flag', private_key: 'block' },
      restore: true,
    },
    // Looser than gdpr on cards: a key given it still has its cards blocked.
    strict: { detectors: { email: 'block', card: 'flag' }, denylist: { terms: ['Projekt Falke'], action: 'block' } },
  },
  keys: {} as Record<string, string>,
}
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL || model.name === EMBEDDING) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = guardrails
    doc.webhooks = { allowAddresses: ['127.0.0.1'], retry: { baseDelayMs: 100, maxDelayMs: 800 }, sweepIntervalMs: 200 }
  },
})
t.teardown(() => gw.stop())
const admin = { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' }

const plain = await gw.createKey({ tier: 'Standard4000' })
const strictKey = await gw.createKey({ tier: 'Standard4000' })
const openKey = await gw.createKey({ tier: 'Basic' })
// The strict key's own policy, applied by a reload of the file.
{
  const doc = parse(readFileSync(gw.configPath, 'utf8')) as Record<string, unknown>
  doc.guardrails = { ...guardrails, keys: { [strictKey.id]: 'strict' } }
  writeFileSync(gw.configPath, stringify(doc))
  const res = await fetch(`${gw.url}/admin/reload`, { method: 'POST', headers: admin })
  if (res.status !== 200) throw new Error(`reload: ${res.status} ${await res.text()}`)
}
const receiver = await startWebhookReceiver()
t.teardown(() => receiver.close())
{
  const res = await fetch(`${gw.url}/admin/webhooks`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ url: receiver.url, events: ['guardrail.triggered'] }),
  })
  const created = (await res.json()) as { secret: string }
  if (res.status !== 201) throw new Error(`webhook endpoint: ${res.status}`)
  receiver.secret = created.secret
}
const openai = sdkClient(gw, plain.key)
const anthropic = new Anthropic({ baseURL: gw.url, apiKey: plain.key, maxRetries: 0 })

/** What the upstream was sent since `from`, as text. */
const sentSince = (from: number): string =>
  upstream.requests
    .slice(from)
    .map((r) => r.body.toString('utf8'))
    .join('\n')

async function refusal(call: Promise<unknown>): Promise<{ status: number; body: unknown; message: string }> {
  try {
    await call
  } catch (err) {
    if (err instanceof OpenAI.APIError || err instanceof Anthropic.APIError)
      return { status: err.status ?? 0, body: err.error, message: err.message }
    throw err
  }
  throw new Error('the call was not refused')
}

t.test('block: 400 guardrail_blocked naming policy, detector and place; the upstream got nothing', async (t) => {
  const before = upstream.requests.length
  const refused = await refusal(
    openai.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: 'You are a shop assistant.' },
        { role: 'user', content: `Charge my card ${CARD} please` },
      ],
    }),
  )
  t.equal(refused.status, 400)
  t.match(refused.body, { code: 'guardrail_blocked', type: 'invalid_request_error', param: 'messages[1].content' })
  t.match(refused.message, /'gdpr'/)
  t.match(refused.message, /'card'/)
  t.notOk(refused.message.includes('4111'), 'the match is not echoed')
  t.equal(upstream.requests.length, before, 'nothing reached the upstream')
})

t.test('block in a tool call argument and in a Responses input, streamed or not', async (t) => {
  const before = upstream.requests.length
  const tool = await refusal(
    openai.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: [
        { role: 'user', content: 'pay' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c1', type: 'function', function: { name: 'pay', arguments: `{"card":"${CARD}"}` } }],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
    }),
  )
  t.match(tool.body, { code: 'guardrail_blocked', param: 'messages[1].tool_calls[0].function.arguments' })
  const responses = await refusal(
    openai.responses.create({ model: MODEL, instructions: 'help', input: [{ role: 'user', content: `card ${CARD}` }] }),
  )
  t.match(responses.body, { code: 'guardrail_blocked', param: 'input[0].content' })
  t.equal(upstream.requests.length, before, 'nothing reached the upstream')
})

t.test('mask: the upstream sees typed placeholders, one per value', async (t) => {
  const before = upstream.requests.length
  const reply = await openai.chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'user', content: `I am ${EMAIL}, IBAN ${IBAN}.` },
      { role: 'user', content: [{ type: 'text', text: `Again: ${EMAIL}` }] },
    ],
  })
  t.ok(reply.choices[0]?.message.content, 'the call succeeds')
  const sent = upstream.requests.at(-1)?.json as { messages: Array<{ content: unknown }> }
  t.equal(upstream.requests.length, before + 1)
  t.same(sent.messages[0]?.content, 'I am [EMAIL_1], IBAN [IBAN_1].')
  t.same(sent.messages[1]?.content, [{ type: 'text', text: 'Again: [EMAIL_1]' }])
  for (const secret of SECRETS)
    t.notOk(sentSince(before).includes(secret), `the upstream never saw ${secret.slice(0, 4)}…`)
  const embedded = await openai.embeddings.create({ model: EMBEDDING, input: [`contact ${EMAIL}`, 'plain'] })
  t.ok(embedded.data.length > 0, 'the embeddings call succeeds')
  t.same((upstream.requests.at(-1)?.json as { input: unknown }).input, ['contact [EMAIL_1]', 'plain'])
})

t.test('restore: a whole reply to the same call gets its values back; a stream keeps the placeholders', async (t) => {
  upstream.options.replyText = 'I will write to [EMAIL_1] about [IBAN_1] and [EMAIL_9].'
  t.teardown(() => {
    delete upstream.options.replyText
  })
  const before = upstream.requests.length
  const messages = [{ role: 'user' as const, content: `I am ${EMAIL}, IBAN ${IBAN}.` }]
  const reply = await openai.chat.completions.create({ model: MODEL, messages })
  t.equal(reply.choices[0]?.message.content, `I will write to ${EMAIL} about ${IBAN} and [EMAIL_9].`)
  t.notOk(sentSince(before).includes(EMAIL), 'the upstream still saw only placeholders')
  const stream = await openai.chat.completions.create({ model: MODEL, messages, stream: true })
  let streamed = ''
  for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? ''
  t.match(streamed, /\[EMAIL_1\]/, 'a stream is not restored')
  // Another caller whose reply names the same placeholder gets nothing of the first's.
  const other = await sdkClient(gw, openKey.key).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'hi' }],
  })
  t.equal(other.choices[0]?.message.content, 'I will write to [EMAIL_1] about [IBAN_1] and [EMAIL_9].')
})

t.test('flag: passes untouched, and is recorded', async (t) => {
  const before = upstream.requests.length
  await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: `Steuer-ID ${TAX_ID}` }] })
  t.ok(sentSince(before).includes(TAX_ID), 'the upstream got the text as it was')
  const { value: page } = await pollUntil(
    () => audit('guardrail.flag'),
    (p) => p.data.length > 0,
  )
  t.match(page.data[0], {
    actor: { type: 'key', id: plain.id },
    via: 'inference',
    object_type: 'request',
    after: {
      policy: 'gdpr',
      action: 'flag',
      findings: [{ detector: 'de_tax_id', action: 'flag', path: 'messages[0].content' }],
    },
  })
})

t.test('Anthropic Messages: block in Anthropic error shape; mask reaches the upstream masked', async (t) => {
  const before = upstream.requests.length
  const refused = await refusal(
    anthropic.messages.create({
      model: MODEL,
      max_tokens: 50,
      system: 'shop assistant',
      messages: [{ role: 'user', content: [{ type: 'text', text: `card ${CARD}` }] }],
    }),
  )
  t.equal(refused.status, 400)
  t.match(refused.body, {
    type: 'error',
    error: { type: 'invalid_request_error', message: /guardrail policy 'gdpr'.*'card'/ },
  })
  t.notOk(JSON.stringify(refused.body).includes('4111'))
  t.equal(upstream.requests.length, before, 'nothing reached the upstream')
  const reply = await anthropic.messages.create({
    model: MODEL,
    max_tokens: 50,
    system: `Reply to ${EMAIL}`,
    messages: [{ role: 'user', content: `My IBAN is ${IBAN}` }],
  })
  t.equal(reply.type, 'message')
  const sent = sentSince(before)
  t.ok(sent.includes('[EMAIL_1]') && sent.includes('[IBAN_1]'), 'masked in the system prompt and the message')
  for (const secret of SECRETS) t.notOk(sent.includes(secret))
})

t.test("a key's own policy is stricter than its tier's, never looser", async (t) => {
  const strict = sdkClient(gw, strictKey.key)
  const before = upstream.requests.length
  const email = await refusal(
    strict.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: EMAIL }] }),
  )
  t.match(email.body, { code: 'guardrail_blocked' })
  t.match(email.message, /'gdpr\+strict'.*'email'/, 'the key made email a block')
  const card = await refusal(
    strict.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: CARD }] }),
  )
  t.match(card.message, /'card'/, "its policy's card flag does not loosen the tier's block")
  const denied = await refusal(
    strict.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Status of projekt falke?' }] }),
  )
  t.match(denied.message, /'denylist'/)
  t.equal(upstream.requests.length, before)
  // A key of a tier without a policy is not checked.
  await sdkClient(gw, openKey.key).chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: CARD }],
  })
  t.ok(sentSince(before).includes(CARD))
})

t.test('audit records, metrics and logs never hold the matched text', async (t) => {
  const { value: blocks } = await pollUntil(
    () => audit('guardrail.block'),
    (p) => p.data.length >= 6,
  )
  const masks = await audit('guardrail.mask')
  t.ok(masks.data.length >= 2, 'masks recorded')
  t.match(blocks.data.at(-1), { after: { policy: 'gdpr', action: 'block', findings: [{ detector: 'card' }] } })
  const everything = JSON.stringify([blocks, masks, await audit('guardrail.flag')])
  for (const secret of SECRETS) t.notOk(everything.includes(secret), `no ${secret.slice(0, 4)}… in the audit log`)
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_guardrail_findings_total\{policy="gdpr",detector="card",action="block"\} [1-9]/)
  t.match(metrics, /tollgate_guardrail_findings_total\{policy="gdpr",detector="email",action="mask"\} [1-9]/)
  const { value: events } = await pollUntil(
    async () => receiver.received.filter((r) => r.type === 'guardrail.triggered'),
    (got) => got.some((r) => r.data.action === 'block') && got.some((r) => r.data.action === 'mask'),
  )
  t.ok(
    events.every((r) => r.verified),
    'signed like every webhook',
  )
  t.match(events.find((r) => r.data.action === 'block')?.data, {
    key_id: String,
    policy: String,
    detectors: Array,
    paths: Array,
  })
  const delivered = events.map((r) => r.body).join('\n')
  for (const secret of SECRETS) t.notOk(delivered.includes(secret), `no ${secret.slice(0, 4)}… in the events`)
  const logs = gw.output()
  for (const secret of SECRETS.filter((s) => s !== TAX_ID && !s.startsWith('4111')))
    t.notOk(logs.includes(secret), 'not in the logs')
})

async function audit(action: string): Promise<{ data: Array<Record<string, unknown>> }> {
  const res = await fetch(`${gw.url}/admin/audit?action=${action}&limit=100`, { headers: admin })
  return (await res.json()) as { data: Array<Record<string, unknown>> }
}

const FIELD_BODIES = fieldBodies({ chat: MODEL, embedding: EMBEDDING })

t.test('a blocked match hidden in any text-bearing field reaches no upstream, on /v2 and /queue', async (t) => {
  const { TEXT_FIELDS } = await import('../../src/guardrails/text-fields.ts')
  const covered = new Set(FIELD_BODIES.map((f) => f.path))
  for (const path of Object.keys(TEXT_FIELDS)) t.ok(covered.has(path), `${path} is tried`)
  const before = upstream.requests.length
  for (const { path, route, body } of FIELD_BODIES)
    for (const prefix of ['/v2', '/queue']) {
      if (prefix === '/queue' && route === 'responses') continue // /queue mirrors chat, completions, embeddings, images, audio
      const res = await fetch(`${gw.url}${prefix}/${route}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${plain.key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body(`pay with ${CARD} today`)),
      })
      const json = (await res.json()) as { error?: { code?: string } }
      t.equal(res.status, 400, `${prefix} ${path}: refused`)
      t.equal(json.error?.code, 'guardrail_blocked', `${prefix} ${path}: guardrail_blocked`)
    }
  t.equal(upstream.requests.length, before, 'nothing reached the upstream')
  // Asynchronously: refused at the door, nothing stored to run later.
  const queued = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${plain.key}`, 'content-type': 'application/json', prefer: 'respond-async' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: CARD }] }),
  })
  t.equal(queued.status, 400)
  t.equal(upstream.requests.length, before)
})
