// External checks with `replies: true` on a running gateway: a whole reply is sent to the
// webhook (direction "reply", each text with its path in the reply) before it goes out; a
// rewrite reaches the caller, a deny stops the reply with guardrail_blocked, a closed
// failure with guardrail_unavailable; a stream is not sent (docs/guardrails.md says why).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { parse } from 'yaml'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { startCheckWebhook } from './external-servers.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const hook = await startCheckWebhook()
t.teardown(() => hook.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'replies'
// A tier whose reply check fails open, with the response cache on (temperature 0 is cached).
plans.tiers.Standard3000!.guardrails = 'repliesOpen'
plans.tiers.Standard3000!.cache = { enabled: true }
const gw = await startTollgate({
  env: { GUARD_HOOK_SECRET: hook.secret },
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = {
      policies: {
        replies: {
          external: [
            {
              name: 'dlp',
              type: 'webhook',
              url: hook.url,
              secretEnv: 'GUARD_HOOK_SECRET',
              timeoutMs: 1000,
              onError: 'closed',
              replies: true,
            },
          ],
        },
        repliesOpen: {
          external: [
            {
              name: 'dlp',
              type: 'webhook',
              url: hook.url,
              secretEnv: 'GUARD_HOOK_SECRET',
              timeoutMs: 200,
              onError: 'open',
              replies: true,
            },
          ],
        },
      },
    }
  },
})
t.teardown(() => gw.stop())
const client = sdkClient(gw, (await gw.createKey({ tier: 'Standard4000' })).key)
const ask = () => client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Tell me' }] })

async function refusal(call: Promise<unknown>): Promise<{ status: number; body: unknown; message: string }> {
  try {
    await call
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status ?? 0, body: err.error, message: err.message }
    throw err
  }
  throw new Error('the call was not refused')
}

t.afterEach(() => {
  delete upstream.options.replyText
})

t.test(
  'an allowed reply goes out as the upstream sent it, after the request and the reply were both asked',
  async (t) => {
    const before = hook.requests.length
    upstream.options.replyText = 'Paris is the capital.'
    const reply = await ask()
    t.equal(reply.choices[0]?.message.content, 'Paris is the capital.')
    const [request, answer] = hook.requests.slice(before)
    t.match(request?.json, { direction: 'request', texts: [{ path: 'messages[0].content', text: 'Tell me' }] })
    t.match(answer?.json, {
      direction: 'reply',
      texts: [{ path: 'choices[0].message.content', text: 'Paris is the capital.' }],
    })
    t.ok(hook.verified.slice(before).every(Boolean), 'both signed')
  },
)

t.test("a rewrite reaches the caller in place of the model's text", async (t) => {
  upstream.options.replyText = 'Here is the REWRITE part.'
  const reply = await ask()
  t.equal(reply.choices[0]?.message.content, 'Here is the [dlp-redacted] part.')
})

t.test('a deny stops the reply; a closed failure answers 503', async (t) => {
  upstream.options.replyText = 'Something to DENY.'
  const denied = await refusal(ask())
  t.equal(denied.status, 400)
  t.match(denied.body, { code: 'guardrail_blocked' })
  t.match(
    denied.message,
    /The reply was stopped by the guardrail policy 'replies': its external webhook check 'dlp' denied it \(contract_terms\)/,
  )
  t.notOk(denied.message.includes('Something'))
  upstream.options.replyText = 'A MALFORMED reply.'
  const failed = await refusal(ask())
  t.equal(failed.status, 503)
  t.match(failed.body, { code: 'guardrail_unavailable' })
  t.match(failed.message, /The reply could not be checked/)
})

t.test('a stream is not sent to the check: it flows as the upstream sends it', async (t) => {
  upstream.options.replyText = 'Something to DENY.'
  const before = hook.requests.length
  const stream = await client.chat.completions.create({
    model: MODEL,
    stream: true,
    messages: [{ role: 'user', content: 'Tell me' }],
  })
  let text = ''
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
  t.equal(text, 'Something to DENY.')
  t.same(
    hook.requests.slice(before).map((r) => r.json.direction),
    ['request'],
    'only the request was checked',
  )
})

t.test('a reply a check failed open on goes out unjudged and is never cached', async (t) => {
  const open = sdkClient(gw, (await gw.createKey({ tier: 'Standard3000' })).key)
  const cached = async (content: string): Promise<string | null> => {
    const { data, response } = await open.chat.completions
      .create({ model: MODEL, temperature: 0, messages: [{ role: 'user', content }] })
      .withResponse()
    t.ok(data.choices[0]?.message.content)
    return response.headers.get('x-tollgate-cache')
  }
  upstream.options.replyText = 'A judged reply.'
  t.equal(await cached('Judged'), 'miss')
  t.equal(await cached('Judged'), 'hit', 'a reply the check allowed is cached')
  upstream.options.replyText = 'A SLOW reply.'
  t.equal(await cached('Unjudged'), 'miss', 'the check timed out: the reply went out (open)')
  t.equal(await cached('Unjudged'), 'miss', 'and was not stored: the next call is judged again')
})
