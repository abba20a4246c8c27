// JSON inside a text field (tool arguments, tool results) is checked as it means: a secret
// spelled with `\uXXXX` (or `\/`) escapes is found, a mask lands in the decoded spelling and
// the text stays the same JSON value with the placeholder in; escapes JSON needs (quotes,
// backslashes, control characters, lone surrogates) stay escapes, and `\\u0041` (an escaped
// backslash, then letters) is not read as an escape.
import t from 'tap'
import { guardrailsSchema } from '../../src/guardrails/config.ts'
import { unescapedJson } from '../../src/guardrails/nested-json.ts'
import { compilePolicies } from '../../src/guardrails/policy.ts'
import { scanBody } from '../../src/guardrails/scan.ts'

const config = guardrailsSchema.parse({
  policies: { p: { detectors: { aws_key: 'block', email: 'mask', password: 'block' } } },
})
const policy = compilePolicies(config).policyFor('p', 'key_x')!
const escapeAll = (s: string): string =>
  s.replace(/(?<!\\)[A-Za-z0-9@.]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
const toolCall = (args: string) => ({
  model: 'm',
  messages: [
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }],
    },
    { role: 'tool', tool_call_id: 'c', content: args },
  ],
})

t.test('an escaped AWS key id in tool arguments and a tool result is blocked', async (t) => {
  const args = JSON.stringify({ key: 'AKIAIOSFODNN7EXAMPLE' }).replace('AKIA', '\\u0041KIA')
  t.notOk(args.includes('AKIA'), 'the raw text does not spell it')
  const verdict = scanBody(toolCall(args), policy)
  t.match(verdict.blocked, { detector: 'aws_key', path: 'messages[0].tool_calls[0].function.arguments' })
  const every = escapeAll(JSON.stringify({ key: 'AKIAIOSFODNN7EXAMPLE' }))
  const result = scanBody({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'c', content: every }] }, policy)
  t.match(result.blocked, { detector: 'aws_key', path: 'messages[0].content' })
  const password = JSON.stringify({ password: 'Hunter2!xyzQ' }).replace('H', '\\u0048')
  t.match(scanBody(toolCall(password), policy).blocked, { detector: 'password' }, 'a member name still gives context')
})

t.test('a mask lands in the decoded spelling; the text is the same JSON value with the placeholder in', async (t) => {
  // Written out: JSON.stringify would round the number.
  const args = `{"to":"${escapeAll('anna@example.org')}","n":12345678901234567890,"note":"a \\"q\\" \\\\ b\\n"}`
  const verdict = scanBody(toolCall(args), policy)
  t.equal(verdict.blocked, undefined)
  const body = verdict.body as ReturnType<typeof toolCall>
  const sent = body.messages[0]!.tool_calls![0]!.function.arguments
  t.notOk(sent.includes('anna') || sent.includes('\\u0061nna'), 'the address is gone in every spelling')
  const meant = JSON.parse(args.replaceAll(escapeAll('anna@example.org'), '[EMAIL_1]')) as unknown
  t.same(JSON.parse(sent), meant)
  t.ok(sent.includes('12345678901234567890'), 'a number keeps every digit')
  t.same(JSON.parse(body.messages[1]!.content as string), meant)
  t.match(meant, { to: '[EMAIL_1]', note: 'a "q" \\ b\n' })
  t.same([...verdict.masked], [['[EMAIL_1]', 'anna@example.org']])
})

t.test('what is decoded, and what is not', async (t) => {
  t.equal(unescapedJson('{"a":"\\u0041\\/b"}'), '{"a":"A/b"}')
  t.equal(unescapedJson('{"a":"\\\\u0041"}'), undefined, 'an escaped backslash, then letters: nothing to decode')
  t.equal(unescapedJson('{"a":"\\u0022\\u005c\\u000a\\ud800x"}'), undefined, 'escapes JSON needs stay')
  t.equal(unescapedJson('{"a":"\\ud83d\\ude00"}'), '{"a":"😀"}', 'a surrogate pair is one character')
  t.equal(
    unescapedJson('plain \\u0041KIA text'),
    undefined,
    'a text that does not start like JSON is read as it stands',
  )
  t.equal(unescapedJson('{"a":"no escapes"}'), undefined)
})
