// Guardrail external checks on a running gateway (docs/guardrails.md, "External checks"),
// with a fake moderation endpoint behind a configured backend and a fake guardrail webhook
// on loopback (external-servers.ts), and a recording upstream: what each verdict does to
// the call (allow, deny, rewrite), what a failure does under onError open and closed
// (a malformed answer, no answer in time), that the webhook is signed as Tollgate's
// webhooks are, that a key's own policy adds a check to its tier's, and that the audit
// log, the events, the metrics and the logs say which check and what it said, never the text.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'
import { startCheckWebhook, startModeration } from './external-servers.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
/** In every text the tests send: it must never show up in a record. */
const MARK = 'zq7731-confidential'
const EMAIL = 'erika.mustermann@example.de'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const moderation = await startModeration()
t.teardown(() => moderation.close())
const hook = await startCheckWebhook()
t.teardown(() => hook.close())

const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'checked'
plans.tiers.Basic!.guardrails = 'lenient'
const webhookCheck = (name: string, onError: 'open' | 'closed') => ({
  name,
  type: 'webhook',
  url: hook.url,
  secretEnv: 'GUARD_HOOK_SECRET',
  timeoutMs: 1000,
  onError,
})
const moderationCheck = { name: 'moderation', type: 'moderation', backend: 'mod', thresholds: { hate: 0.5 } }
const guardrails = {
  policies: {
    checked: {
      detectors: { email: 'mask' },
      external: [{ ...moderationCheck, onError: 'closed' }, webhookCheck('dlp', 'closed')],
    },
    lenient: { external: [webhookCheck('dlp_open', 'open')] },
    extra: { external: [{ ...moderationCheck, onError: 'closed' }] },
  },
  keys: {} as Record<string, string>,
}
const gw = await startTollgate({
  env: { GUARD_HOOK_SECRET: hook.secret, MOD_KEY: 'mod-key-for-tests' },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      up: { type: 'openai', baseUrl: upstream.url },
      mod: { type: 'openai', baseUrl: `${moderation.url}/v1`, apiKeyEnv: 'MOD_KEY' },
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = guardrails
    doc.webhooks = { allowAddresses: ['127.0.0.1'], retry: { baseDelayMs: 100, maxDelayMs: 800 }, sweepIntervalMs: 200 }
  },
})
t.teardown(() => gw.stop())
const admin = { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' }

const checkedKey = await gw.createKey({ tier: 'Standard4000' })
const lenientKey = await gw.createKey({ tier: 'Basic' })
const extraKey = await gw.createKey({ tier: 'Basic' })
{
  // The extra key's own policy, put in force by a reload of the file.
  const doc = parse(readFileSync(gw.configPath, 'utf8')) as Record<string, unknown>
  doc.guardrails = { ...guardrails, keys: { [extraKey.id]: 'extra' } }
  writeFileSync(gw.configPath, stringify(doc))
  const res = await fetch(`${gw.url}/admin/reload`, { method: 'POST', headers: admin })
  if (res.status !== 200) throw new Error(`reload: ${res.status} ${await res.text()}`)
}
const events = await startWebhookReceiver()
t.teardown(() => events.close())
{
  const res = await fetch(`${gw.url}/admin/webhooks`, {
    method: 'POST',
    headers: admin,
    body: JSON.stringify({ url: events.url, events: ['guardrail.triggered'] }),
  })
  if (res.status !== 201) throw new Error(`webhook endpoint: ${res.status}`)
  events.secret = ((await res.json()) as { secret: string }).secret
}
const checked = sdkClient(gw, checkedKey.key)
const lenient = sdkClient(gw, lenientKey.key)

const ask = (client: OpenAI, ...texts: string[]) =>
  client.chat.completions.create({
    model: MODEL,
    messages: texts.map((text) => ({ role: 'user' as const, content: `${text} ${MARK}` })),
  })

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

const lastUpstream = (): { messages: Array<{ content: string }> } =>
  upstream.requests.at(-1)?.json as { messages: Array<{ content: string }> }

t.test("moderation allow: the texts go to the backend's /moderations with its key; the call runs", async (t) => {
  const before = { mod: moderation.requests.length, up: upstream.requests.length }
  const reply = await ask(checked, 'What is the capital of France?', 'And of Spain?')
  t.ok(reply.choices[0]?.message.content)
  t.equal(upstream.requests.length, before.up + 1, 'the upstream was called')
  const sent = moderation.requests.at(-1)!
  t.equal(moderation.requests.length, before.mod + 1, 'one moderation request for all the texts')
  t.equal(sent.path, '/v1/moderations')
  t.equal(sent.headers.authorization, 'Bearer mod-key-for-tests', "the backend's own key")
  t.same(sent.json, {
    model: 'omni-moderation-latest',
    input: [`What is the capital of France? ${MARK}`, `And of Spain? ${MARK}`],
  })
})

t.test('moderation deny: flagged, or a category at its threshold; nothing reaches the upstream', async (t) => {
  const before = upstream.requests.length
  const flagged = await refusal(ask(checked, 'hello', 'I will KILL the process'))
  t.equal(flagged.status, 400)
  t.match(flagged.body, { code: 'guardrail_blocked', type: 'invalid_request_error', param: 'messages[1].content' })
  t.match(flagged.message, /policy 'checked'.*moderation check 'moderation' denied it \(violence\)/)
  t.notOk(flagged.message.includes('KILL') || flagged.message.includes(MARK), 'the text is not echoed')
  const scored = await refusal(ask(checked, 'some HATE here'))
  t.match(scored.message, /denied it \(hate\) at messages\[0\]\.content/, 'not flagged, but over the threshold')
  t.equal(upstream.requests.length, before, 'nothing reached the upstream')
})

t.test('webhook allow: signed like Tollgate webhooks, sent the masked texts with their paths', async (t) => {
  const before = hook.requests.length
  await checked.chat.completions.create({
    model: MODEL,
    messages: [
      { role: 'system', content: `Be brief. ${MARK}` },
      { role: 'user', content: [{ type: 'text', text: `Write to ${EMAIL} ${MARK}` }] },
    ],
  })
  const sent = hook.requests.at(-1)!
  t.equal(hook.requests.length, before + 1)
  t.ok(hook.verified.at(-1), 'the receiver verifies the signature with the shared secret')
  t.match(sent.headers, { 'webhook-id': /^gchk_/, 'webhook-timestamp': /^\d+$/, 'webhook-signature': /^v1,/ })
  t.match(sent.json, {
    type: 'guardrail.check',
    policy: 'checked',
    check: 'dlp',
    key_id: checkedKey.id,
    endpoint: 'chat.completions',
    model: MODEL,
  })
  t.same(sent.json.texts, [
    { path: 'messages[0].content', text: `Be brief. ${MARK}` },
    { path: 'messages[1].content[0].text', text: `Write to [EMAIL_1] ${MARK}` },
  ])
  t.notOk(sent.body.includes(EMAIL), 'a masked value never reaches the check')
})

t.test('webhook deny: 400 naming the policy, the check and its reason code', async (t) => {
  const before = upstream.requests.length
  const denied = await refusal(ask(checked, 'DENY this one'))
  t.equal(denied.status, 400)
  t.match(denied.body, { code: 'guardrail_blocked' })
  t.match(denied.message, /policy 'checked'.*webhook check 'dlp' denied it \(contract_terms\)/)
  t.notOk(denied.message.includes(MARK))
  // /queue, waiting or asynchronous: judged at the door, nothing stored to run later.
  for (const prefer of [{}, { prefer: 'respond-async' }]) {
    const res = await fetch(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${checkedKey.key}`, 'content-type': 'application/json', ...prefer },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `DENY ${MARK}` }] }),
    })
    t.equal(res.status, 400, `/queue ${JSON.stringify(prefer)}: refused`)
    t.match(await res.json(), { error: { code: 'guardrail_blocked' } })
  }
  t.equal(upstream.requests.length, before)
})

t.test('webhook rewrite: the upstream sees the new text, the other texts as they were', async (t) => {
  const before = upstream.requests.length
  await ask(checked, 'keep me', 'please REWRITE me')
  t.equal(upstream.requests.length, before + 1)
  t.same(
    lastUpstream().messages.map((m) => m.content),
    [`keep me ${MARK}`, `please [dlp-redacted] me ${MARK}`],
  )
  t.notOk(upstream.requests.at(-1)!.body.toString('utf8').includes('REWRITE'))
})

t.test('a malformed answer is a failure: closed refuses with 503, open lets the call through', async (t) => {
  const before = upstream.requests.length
  const closed = await refusal(ask(checked, 'MALFORMED'))
  t.equal(closed.status, 503)
  t.match(closed.body, { code: 'guardrail_unavailable', type: 'server_error' })
  t.match(closed.message, /'checked'.*'dlp', which failed \(an answer that is not allow, deny or rewrite\)/)
  t.equal(upstream.requests.length, before, 'closed: nothing reached the upstream')
  await ask(lenient, 'MALFORMED')
  t.equal(upstream.requests.length, before + 1, 'open: the call ran')
})

t.test('no answer in time: closed refuses (in each protocol), open lets the call through', async (t) => {
  const before = upstream.requests.length
  const started = Date.now()
  const closed = await refusal(ask(checked, 'SLOW'))
  t.equal(closed.status, 503)
  t.match(closed.message, /'dlp', which failed \(no answer within 1000 ms\)/)
  t.ok(Date.now() - started < 5000, 'within the check timeout, not the client timeout')
  const anthropic = new Anthropic({ baseURL: gw.url, apiKey: checkedKey.key, maxRetries: 0 })
  const overloaded = await refusal(
    anthropic.messages.create({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: `SLOW ${MARK}` }] }),
  )
  t.equal(overloaded.status, 529, "Anthropic's status for a gateway that cannot serve now")
  t.match(overloaded.body, {
    type: 'error',
    error: { type: 'overloaded_error', message: /guardrail policy 'checked'/ },
  })
  t.equal(upstream.requests.length, before)
  await ask(lenient, 'SLOW')
  t.equal(upstream.requests.length, before + 1, 'open: the call ran')
})

t.test("a key's own policy adds an external check to its tier's", async (t) => {
  const before = moderation.requests.length
  await ask(lenient, 'KILL the job')
  t.equal(moderation.requests.length, before, "the tier's policy has no moderation: it ran")
  const extra = await refusal(ask(sdkClient(gw, extraKey.key), 'KILL the job'))
  t.match(extra.message, /policy 'lenient\+extra'.*'moderation' denied it \(violence\)/)
  const denied = await refusal(ask(sdkClient(gw, extraKey.key), 'DENY'))
  t.match(denied.message, /'dlp_open' denied it/, "the tier's own check still runs")
})

t.test('audit, events, metrics and logs: which check and what it said, never the text', async (t) => {
  const { value: blocks } = await pollUntil(
    () => audit('guardrail.block'),
    (p) => p.data.length >= 5,
  )
  t.match(
    blocks.data.find((e) => (e.after as { check?: { name: string } }).check?.name === 'dlp'),
    {
      actor: { type: 'key', id: checkedKey.id },
      via: 'inference',
      after: { policy: 'checked', action: 'block', check: { type: 'webhook', verdict: String } },
    },
  )
  const rewrites = await audit('guardrail.rewrite')
  t.match(rewrites.data[0], {
    after: { action: 'rewrite', check: { name: 'dlp', verdict: 'rewrite' }, paths: ['messages[1].content'] },
  })
  const errors = await audit('guardrail.error')
  const verdicts = errors.data.map((e) => (e.after as { check: { verdict: string; on_error: string } }).check)
  t.ok(
    verdicts.some((c) => c.verdict === 'timeout' && c.on_error === 'open'),
    'an open timeout is recorded',
  )
  t.ok(
    verdicts.some((c) => c.verdict === 'error' && c.on_error === 'closed'),
    'a closed failure is recorded',
  )
  const records = JSON.stringify([blocks, rewrites, errors])
  for (const text of [MARK, 'KILL', 'REWRITE', 'dlp-redacted', EMAIL])
    t.notOk(records.includes(text), `no ${text} in the audit log`)
  const { value: told } = await pollUntil(
    async () => events.received.filter((r) => r.type === 'guardrail.triggered'),
    (got) =>
      ['block', 'rewrite', 'flag'].every((a) => got.some((r) => r.data.action === a && r.data.check !== undefined)),
  )
  t.ok(
    told.every((r) => r.verified),
    'events are signed',
  )
  t.match(told.find((r) => r.data.action === 'rewrite')?.data, {
    policy: 'checked',
    check: { name: 'dlp', verdict: 'rewrite' },
  })
  const delivered = told.map((r) => r.body).join('\n')
  for (const text of [MARK, 'KILL', 'REWRITE', 'dlp-redacted'])
    t.notOk(delivered.includes(text), `no ${text} in the events`)
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  for (const [check, verdict] of [
    ['moderation', 'allow'],
    ['moderation', 'deny'],
    ['dlp', 'allow'],
    ['dlp', 'deny'],
    ['dlp', 'rewrite'],
    ['dlp', 'error'],
    ['dlp', 'timeout'],
  ])
    t.match(
      metrics,
      new RegExp(
        `tollgate_guardrail_external_total\\{policy="checked",check="${check}",direction="request",verdict="${verdict}"\\} [1-9]`,
      ),
    )
  t.match(metrics, /tollgate_guardrail_external_seconds_count\{policy="checked",check="dlp"\} [1-9]/)
  t.notOk(gw.output().includes(MARK), 'not in the logs')
})

async function audit(action: string): Promise<{ data: Array<Record<string, unknown>> }> {
  const res = await fetch(`${gw.url}/admin/audit?action=${action}&limit=100`, { headers: admin })
  return (await res.json()) as { data: Array<Record<string, unknown>> }
}
