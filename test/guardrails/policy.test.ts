// The walk finds text in every field its table lists (and nowhere else), masking keeps one
// placeholder per value, a key's policy only ever makes its tier's stricter, and a custom
// pattern that could backtrack without end is refused at load.
import t from 'tap'
import { guardrailsSchema } from '../../src/guardrails/config.ts'
import { compilePolicies, stricter } from '../../src/guardrails/policy.ts'
import { scanBody } from '../../src/guardrails/scan.ts'
import { TEXT_FIELDS, NOT_CHECKED, walkTexts } from '../../src/guardrails/text-fields.ts'

const PII = 'mail anna@example.org'

/** One body per request shape, with PII in every field the table lists. */
const bodies: Record<string, Record<string, unknown>> = {
  chat: {
    model: 'm',
    messages: [
      { role: 'system', content: PII },
      {
        role: 'user',
        content: [
          { type: 'text', text: PII },
          { type: 'image_url', image_url: { url: 'https://x/a@b.de' } },
        ],
      },
      {
        role: 'assistant',
        content: null,
        refusal: PII,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: `{"to":"anna@example.org"}` } }],
        function_call: { name: 'f', arguments: PII },
      },
      { role: 'assistant', content: [{ type: 'refusal', refusal: PII }] },
      { role: 'tool', tool_call_id: 'c1', content: PII, name: 'anna@example.org' },
    ],
    prediction: { type: 'content', content: [{ type: 'text', text: PII }] },
    metadata: { owner: 'anna@example.org' },
    user: 'anna@example.org',
  },
  completions: { model: 'm', prompt: [PII, PII], suffix: PII },
  embeddings: { model: 'm', input: [PII, 'plain'] },
  embedding: { model: 'm', input: PII },
  responses: {
    model: 'm',
    instructions: PII,
    input: [
      { role: 'user', content: PII },
      { role: 'user', content: [{ type: 'input_text', text: PII }] },
      { type: 'function_call', call_id: 'c', name: 'f', arguments: PII },
      { type: 'function_call_output', call_id: 'c', output: PII },
      { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_text', text: PII }] },
      { type: 'custom_tool_call', call_id: 'c', name: 'f', input: PII },
    ],
  },
  image: { model: 'm', prompt: PII },
  prediction: { model: 'm', messages: [], prediction: { type: 'content', content: PII } },
}

t.test('the walk visits the listed fields, and only those', async (t) => {
  const seen = new Set<string>()
  for (const body of Object.values(bodies))
    walkTexts(body, (v) => {
      seen.add(v.where().replace(/\[\d+\]/g, '[]'))
      t.ok(v.text.includes('anna@example.org') || v.text === 'plain', v.where())
    })
  const listed = new Set(Object.keys(TEXT_FIELDS).map((p) => p.slice(1)))
  t.same(
    [...seen].filter((p) => !listed.has(p)),
    [],
    'nothing outside the table',
  )
  t.same(
    [...listed].filter((p) => !seen.has(p)),
    [],
    'every listed field is reached by some body',
  )
  for (const path of Object.keys(NOT_CHECKED)) t.notOk(Object.hasOwn(TEXT_FIELDS, path), `${path}: not both`)
})

const config = guardrailsSchema.parse({
  policies: {
    base: { detectors: { email: 'flag', iban: 'mask', card: 'block' } },
    strict: {
      detectors: { email: 'mask', iban: 'flag' },
      patterns: [{ name: 'ticket', regex: 'TICKET-\\d{4}', action: 'mask' }],
      denylist: { terms: ['Projekt Falke'], action: 'block' },
    },
  },
  keys: { key_strict: 'strict' },
})

t.test("a key's policy makes its tier's stricter, never looser", async (t) => {
  const book = compilePolicies(config)
  const merged = book.policyFor('base', 'key_strict')
  const actions = Object.fromEntries((merged?.rules ?? []).map((r) => [r.detector.name, r.action]))
  t.same(actions, { email: 'mask', iban: 'mask', card: 'block', ticket: 'mask', denylist: 'block' })
  t.equal(merged?.name, 'base+strict')
  t.equal(book.policyFor('base', 'key_other')?.name, 'base')
  t.equal(book.policyFor(undefined, 'key_strict')?.name, 'strict')
  t.equal(book.policyFor(undefined, 'key_other'), undefined)
  t.equal(stricter('flag', 'block'), 'block')
  t.equal(stricter('mask', 'off'), 'mask')
})

t.test('mask: one placeholder per value, per type, through the whole call', async (t) => {
  const body = {
    model: 'm',
    messages: [
      { role: 'user', content: 'a@example.org and b@example.org, again a@example.org; TICKET-1234' },
      { role: 'user', content: [{ type: 'text', text: 'from b@example.org' }] },
    ],
  }
  const verdict = scanBody(body, compilePolicies(config).policyFor(undefined, 'key_strict')!)
  t.equal(verdict.blocked, undefined)
  const sent = verdict.body as typeof body
  t.same(sent.messages[0]?.content, '[EMAIL_1] and [EMAIL_2], again [EMAIL_1]; [TICKET_1]')
  t.same(sent.messages[1]?.content, [{ type: 'text', text: 'from [EMAIL_2]' }])
  t.equal(
    body.messages[0]?.content,
    'a@example.org and b@example.org, again a@example.org; TICKET-1234',
    'the body itself is not changed',
  )
  t.equal(sent.model, body.model)
  t.same(
    [...verdict.masked.entries()],
    [
      ['[EMAIL_1]', 'a@example.org'],
      ['[EMAIL_2]', 'b@example.org'],
      ['[TICKET_1]', 'TICKET-1234'],
    ],
  )
  t.same(
    verdict.findings.map((f) => f.path),
    [
      'messages[0].content',
      'messages[0].content',
      'messages[0].content',
      'messages[0].content',
      'messages[1].content[0].text',
    ],
  )
})

t.test('block: the body is left as it was, the finding names detector and path', async (t) => {
  const body = { model: 'm', messages: [{ role: 'user', content: 'a@example.org about projekt falke' }] }
  const verdict = scanBody(body, compilePolicies(config).policyFor(undefined, 'key_strict')!)
  t.same(verdict.blocked, { detector: 'denylist', action: 'block', path: 'messages[0].content' })
  t.equal(body.messages[0]?.content, 'a@example.org about projekt falke', 'nothing masked')
})

t.test('patterns that could backtrack without end, and unknown names, are refused at load', async (t) => {
  const refused = (policy: unknown): string[] => {
    const parsed = guardrailsSchema.safeParse({ policies: { p: policy } })
    return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`)
  }
  t.match(refused({ patterns: [{ name: 'x', regex: '(a+)+$', action: 'block' }] }).join(), /exponential/)
  t.match(refused({ patterns: [{ name: 'x', regex: '(', action: 'block' }] }).join(), /not a regular expression/)
  t.match(refused({ patterns: [{ name: 'x', regex: 'a*', action: 'block' }] }).join(), /empty/)
  t.match(refused({ detectors: { emails: 'block' } }).join(), /built-in detector/)
  t.match(refused({ detectors: { email: 'delete' } }).join(), /detectors.email/)
  t.same(refused({ patterns: [{ name: 'x', regex: 'K-\\d{6}', action: 'flag' }] }), [])
})

t.test("reply checks: a key's make its tier's stricter, never looser; a reply is never masked", async (t) => {
  const parsed = guardrailsSchema.parse({
    policies: {
      tier: { replies: { card: 'block', email: 'flag' } },
      key: { replies: { card: 'flag', iban: 'block' } },
    },
    keys: { key_k: 'key' },
  })
  const merged = compilePolicies(parsed).policyFor('tier', 'key_k')
  t.same(Object.fromEntries((merged?.replyRules ?? []).map((r) => [r.detector.name, r.action])), {
    email: 'flag',
    iban: 'block',
    card: 'block',
  })
  t.same(merged?.rules, [], 'no request rules')
  const refused = guardrailsSchema.safeParse({ policies: { p: { replies: { email: 'mask' } } } })
  t.notOk(refused.success, 'mask is not a reply action')
  t.notOk(guardrailsSchema.safeParse({ policies: { p: { replies: { emails: 'flag' } } } }).success, 'unknown name')
})
