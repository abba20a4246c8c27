// Fuzz the guardrails (#43): a match of every built-in detector hidden in every text-bearing
// field of the guardrails' table (test/guardrails/field-bodies.ts, one body per field of
// src/guardrails/text-fields.ts), among other turns and filler, on /v2 and /queue, streamed
// or not, and Anthropic's Messages route. The caller's tier has a policy that blocks every
// detector; every model is on a recording upstream. Each planted call is a 400
// guardrail_blocked (in the caller's protocol's shape) that does not echo the match, and
// the upstream never receives one; a call with filler only passes, so the part is not
// refusing everything. Tool arguments and tool results are also planted in with every
// character of their JSON spelled as a `\uXXXX` escape: still refused.
// Cases: FUZZ_CASES, default 300. The seed is fixed (FUZZ_SEED picks others), so a failure
// replays as it is.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import t from 'tap'
import { parse } from 'yaml'
import { DETECTORS } from '../../src/guardrails/detectors.ts'
import { TEXT_FIELDS } from '../../src/guardrails/text-fields.ts'
import { generateKey } from '../../src/keys/format.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { fieldBodies, type FieldBody } from '../guardrails/field-bodies.ts'

const cases = Number(process.env.FUZZ_CASES ?? 300)
const seed = Number(process.env.FUZZ_SEED ?? 43)
const MODEL = 'Mistral-Small-24B-Instruct-2501'
const EMBEDDING = 'jina-embeddings-v2-base-de'

/** A value each built-in detector finds, with what must stand before and after it. */
const MATCHES: Readonly<Record<string, readonly string[]>> = {
  private_key: ['-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----'],
  tollgate_key: [generateKey()],
  aws_key: ['AKIAIOSFODNN7EXAMPLE', 'aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'],
  gcp_key: ['AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe'],
  azure_key: ['AZURE_OPENAI_API_KEY=0123456789abcdef0123456789abcdef'],
  github_token: ['ghp_abcdefghijklmnopqrstuvwxyz0123456789'],
  openai_key: ['sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t'],
  jwt: ['eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk'],
  bearer_token: ['Authorization: Bearer abcDEF1234567890xyz'],
  password: ['password: Hunter2!xyzQ', 'Passwort=Sommer2024!Q'],
  email: ['erika.mustermann@example.de', 'john.doe+x@mail.example.co.uk'],
  iban: ['DE89 3704 0044 0532 0130 00', 'GB82WEST12345698765432'],
  card: ['4111 1111 1111 1111', '5500-0000-0000-0004', '378282246310005'],
  de_tax_id: ['86095742719', '47 036 892 816'],
  phone: ['+49 30 1234567', '0151-23456789'],
  ip_address: ['192.168.1.10', '2001:db8::8a2e:370:7334'],
}
/** The part of each planted value the upstream must never see (the secret, not its context word). */
const secretOf = (value: string): string => value.replace(/^.*(?:= |=|: )/s, '')

const ANTHROPIC: FieldBody[] = [
  {
    path: 'anthropic .messages[].content',
    route: '/v1/messages',
    body: (x) => ({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: x }] }),
  },
  {
    path: 'anthropic .messages[].content[].text',
    route: '/v1/messages',
    body: (x) => ({ model: MODEL, max_tokens: 20, messages: [{ role: 'user', content: [{ type: 'text', text: x }] }] }),
  },
  {
    path: 'anthropic .system',
    route: '/v1/messages',
    body: (x) => ({ model: MODEL, max_tokens: 20, system: x, messages: [{ role: 'user', content: 'hi' }] }),
  },
]
/** JSON text with every letter, digit, '@' and '.' of it spelled as a `\uXXXX` escape (JSON's own escapes kept). */
const escapeAll = (json: string): string =>
  json.replace(/(?<!\\)[A-Za-z0-9@.]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
// Tool arguments and tool results are JSON in a string: a match spelled with escapes is still one.
const ESCAPED: FieldBody[] = [
  {
    path: 'escaped .messages[].tool_calls[].function.arguments',
    route: 'chat/completions',
    body: (x) => ({
      model: MODEL,
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c', type: 'function', function: { name: 'f', arguments: escapeAll(JSON.stringify({ x })) } },
          ],
        },
        { role: 'tool', tool_call_id: 'c', content: 'ok' },
      ],
    }),
  },
  {
    path: 'escaped tool result .messages[].content',
    route: 'chat/completions',
    body: (x) => ({
      model: MODEL,
      messages: [
        { role: 'user', content: 'go' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
        { role: 'tool', tool_call_id: 'c', content: escapeAll(JSON.stringify({ result: x })) },
      ],
    }),
  },
  {
    path: 'escaped .input[].output',
    route: 'responses',
    body: (x) => ({
      model: MODEL,
      input: [
        { type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c', output: escapeAll(JSON.stringify({ result: x })) },
      ],
    }),
  },
]
const FIELDS = [...fieldBodies({ chat: MODEL, embedding: EMBEDDING }), ...ANTHROPIC, ...ESCAPED]

t.test('every text-bearing field is planted in', async (t) => {
  const covered = new Set(FIELDS.map((f) => f.path))
  for (const path of Object.keys(TEXT_FIELDS)) t.ok(covered.has(path), path)
  for (const name of DETECTORS.keys()) t.ok(Object.hasOwn(MATCHES, name), `a ${name} is planted`)
})

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, unknown>
}
plans.tiers.Fuzz = { description: 'no limits', default: {}, guardrails: 'everything' }
const gw = await startTollgate({
  dropRequestLogs: true,
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL || model.name === EMBEDDING) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = {
      policies: { everything: { detectors: Object.fromEntries([...DETECTORS.keys()].map((name) => [name, 'block'])) } },
    }
  },
})
t.teardown(() => gw.stop())
const { key } = await gw.createKey({ tier: 'Fuzz' })

// Filler: words with no digits, no '@', no ':' (nothing any detector finds), and the
// characters a match can stand next to.
const filler = fc
  .array(fc.constantFrom('please', 'the', 'Rechnung', 'for', 'Kunde', 'über', 'ok', 'réponse', '日本', 'x'), {
    maxLength: 8,
  })
  .map((words) => words.join(' '))
const edge = fc.constantFrom(' ', '\n', '\t', ' (', ') ', ', ', '. ', ' "', '" ', '\u00a0', ' → ')
const planted = fc.record({
  detector: fc.constantFrom(...Object.keys(MATCHES)),
  pick: fc.nat(),
  before: filler,
  open: edge,
  close: edge,
  after: filler,
})
const call = fc.record({
  field: fc.constantFrom(...FIELDS),
  prefix: fc.constantFrom('/v2', '/queue'),
  stream: fc.boolean(),
  /** Filler only: must pass. */
  clean: fc.boolean(),
  planted,
})

t.test(`a block policy lets no match through: ${cases} cases`, async (t) => {
  const upstreamAtStart = upstream.requests.length
  let blocked = 0
  let passed = 0
  const secrets = new Set<string>()
  await fc.assert(
    fc.asyncProperty(call, async ({ field, prefix, stream, clean, planted: p }) => {
      const values = MATCHES[p.detector]!
      const value = values[p.pick % values.length]!
      const text = clean ? `${p.before}${p.open}${p.after}` : `${p.before}${p.open}${value}${p.close}${p.after}`
      const anthropic = field.route.startsWith('/v1/messages')
      // /queue mirrors chat, completions, embeddings, images and audio, and Anthropic's Messages.
      const url =
        anthropic || (prefix === '/queue' && field.route === 'responses')
          ? `${gw.url}${anthropic && prefix === '/queue' ? '/queue' : ''}${anthropic ? field.route : `/v2/${field.route}`}`
          : `${gw.url}${prefix}/${field.route}`
      const body = { ...field.body(text), ...(stream && field.route !== 'embeddings' ? { stream: true } : {}) }
      const sentBefore = upstream.requests.length
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          ...(anthropic ? { 'x-api-key': key, 'anthropic-version': '2023-06-01' } : { authorization: `Bearer ${key}` }),
          'content-type': 'application/json',
        },
        body: JSON.stringify(body),
      })
      const answer = await res.text()
      const where = `${url} ${field.path}${stream ? ' (stream)' : ''}`
      if (clean) {
        if (res.status !== 200) throw new Error(`${where}: filler only was refused: ${res.status} ${answer}`)
        passed++
        return
      }
      const secret = secretOf(value)
      secrets.add(secret)
      if (res.status !== 400) throw new Error(`${where}: a ${p.detector} was let through: ${res.status}`)
      const json = JSON.parse(answer) as { type?: string; error?: { code?: string; type?: string; message?: string } }
      if (anthropic) {
        if (json.type !== 'error' || !/guardrail policy 'everything'/.test(json.error?.message ?? ''))
          throw new Error(`${where}: not Anthropic's shape of a guardrail refusal: ${answer}`)
      } else if (json.error?.code !== 'guardrail_blocked') throw new Error(`${where}: not guardrail_blocked: ${answer}`)
      if (answer.includes(secret)) throw new Error(`${where}: the refusal echoes the match`)
      if (upstream.requests.length !== sentBefore) throw new Error(`${where}: the upstream was called`)
      blocked++
    }),
    { numRuns: cases, seed, endOnFailure: true },
  )
  const received = upstream.requests
    .slice(upstreamAtStart)
    .map((r) => r.body.toString('utf8'))
    .join('\n')
  for (const secret of secrets) t.notOk(received.includes(secret), `no ${secret.slice(0, 6)}… reached the upstream`)
  t.ok(blocked > cases / 4, `${blocked} planted calls refused`)
  t.ok(passed > cases / 4, `${passed} calls of filler only passed`)
})
