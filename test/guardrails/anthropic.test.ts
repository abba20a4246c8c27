// Guardrails on Anthropic's Messages route, through the official Anthropic SDK on a running
// gateway: every place a Messages body carries text is checked after its translation at the
// edge (system given as text blocks, a tool_use block's input, a tool_result's content as a
// string and as blocks): a block is refused in Anthropic's error shape naming the translated
// field, with nothing sent upstream; a mask reaches the upstream masked in each of them.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Anthropic from '@anthropic-ai/sdk'
import t from 'tap'
import { parse } from 'yaml'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CARD = '4111 1111 1111 1111'
const EMAIL = 'erika.mustermann@example.de'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'gdpr'
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = { policies: { gdpr: { detectors: { email: 'mask', card: 'block' } } } }
  },
})
t.teardown(() => gw.stop())
const { key } = await gw.createKey({ tier: 'Standard4000' })
const anthropic = new Anthropic({ baseURL: gw.url, apiKey: key, maxRetries: 0 })

type Param = Anthropic.MessageCreateParamsNonStreaming
/** A conversation with a tool call and its result; `x` planted where `at` says. */
function body(at: 'system' | 'tool_use' | 'tool_result' | 'tool_result_blocks', x: string): Param {
  return {
    model: MODEL,
    max_tokens: 20,
    system: [
      { type: 'text', text: 'You run a shop.' },
      ...(at === 'system' ? [{ type: 'text' as const, text: x }] : []),
    ],
    messages: [
      { role: 'user', content: 'pay my order' },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'tu_1', name: 'pay', input: { note: at === 'tool_use' ? x : 'none' } }],
      },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'tu_1',
            content: at === 'tool_result_blocks' ? [{ type: 'text', text: x }] : at === 'tool_result' ? x : 'paid',
          },
        ],
      },
    ],
  }
}

const WHERE = {
  system: 'messages[0].content',
  tool_use: 'messages[2].tool_calls[0].function.arguments',
  tool_result: 'messages[3].content',
  tool_result_blocks: 'messages[3].content',
} as const

t.test('a block anywhere is refused in Anthropic shape, naming the translated field', async (t) => {
  for (const [at, where] of Object.entries(WHERE) as Array<[keyof typeof WHERE, string]>) {
    const before = upstream.requests.length
    const err = await anthropic.messages.create(body(at, `card ${CARD}`)).then(
      () => undefined,
      (e: unknown) => e,
    )
    t.ok(err instanceof Anthropic.APIError, `${at}: refused`)
    const api = err as InstanceType<typeof Anthropic.APIError>
    t.equal(api.status, 400, at)
    t.match(api.error, { type: 'error', error: { type: 'invalid_request_error' } }, at)
    t.ok(api.message.includes(`'card' check matched at ${where}`), `${at}: names ${where}`)
    t.notOk(JSON.stringify(api.error).includes('4111'), `${at}: the match is not echoed`)
    t.equal(upstream.requests.length, before, `${at}: nothing reached the upstream`)
  }
})

t.test('a mask reaches the upstream masked in each place', async (t) => {
  for (const at of Object.keys(WHERE) as Array<keyof typeof WHERE>) {
    const before = upstream.requests.length
    const reply = await anthropic.messages.create(body(at, `write to ${EMAIL}`))
    t.equal(reply.type, 'message', `${at}: answered`)
    const sent = upstream.requests.slice(before).map((r) => r.body.toString('utf8'))
    t.equal(sent.length, 1, at)
    t.ok(sent[0]?.includes('[EMAIL_1]'), `${at}: the placeholder was sent`)
    t.notOk(sent[0]?.includes(EMAIL), `${at}: the address never left`)
  }
})
