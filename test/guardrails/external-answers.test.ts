// What counts as an answer of an external check, tried against a service on loopback that
// answers whatever each test sets: only the contract's three shapes (webhook) or one result
// per text (moderation) are verdicts; everything else (another field, a reason that is not a
// code, a rewrite of a path not sent or of one twice, a status that is not 2xx, a body that
// is not JSON or is too long, no answer in time) is a failure whose problem never quotes the
// answer.
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { ModerationCheck, WebhookCheck } from '../../src/guardrails/external/config.ts'
import { moderate } from '../../src/guardrails/external/moderation.ts'
import { createAgents } from '../../src/guardrails/external/post.ts'
import { askWebhook } from '../../src/guardrails/external/webhook.ts'
import { verifyStandardWebhook } from '../helpers/webhook-receiver.ts'

let answer: (res: ServerResponse) => void = (res) => res.end('{}')
const bodies: Array<{ headers: IncomingHttpHeaders; body: string }> = []
const server = createServer((req, res) => {
  let body = ''
  req.on('data', (c: Buffer) => (body += c.toString('utf8')))
  req.on('end', () => {
    bodies.push({ headers: req.headers, body })
    answer(res)
  })
})
await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
t.teardown(
  () =>
    new Promise<void>((done) => {
      server.close(() => done())
      server.closeAllConnections()
    }),
)
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
const agents = createAgents()
const SECRET = 'whsec_dGVzdC1zZWNyZXQtb2YtdGhpcnR5LXR3by1ieXRlcyE='
const hook: WebhookCheck = {
  name: 'dlp',
  type: 'webhook',
  url: `${url}/check`,
  secretEnv: 'X',
  timeoutMs: 300,
  onError: 'closed',
  replies: false,
  maxAnswerBytes: 1024,
}
const subject = {
  policy: 'p',
  direction: 'request',
  requestId: 'r1',
  keyId: 'key_a',
  endpoint: 'chat.completions',
  model: 'm',
} as const
const texts = [
  { path: 'messages[0].content', text: 'one' },
  { path: 'messages[1].content', text: 'two' },
]
const json = (value: unknown) => (res: ServerResponse) => res.writeHead(200).end(JSON.stringify(value))
const ask = () =>
  askWebhook(hook, subject, texts, SECRET, agents).catch((err: Error & { kind: string }) => ({
    verdict: err.kind,
    problem: err.message,
  }))

t.test('the three verdicts, and the request signed as a receiver verifies it', async (t) => {
  answer = json({ verdict: 'allow' })
  t.same(await ask(), { verdict: 'allow' })
  t.equal(verifyStandardWebhook(SECRET, bodies.at(-1)!.headers, bodies.at(-1)!.body), null)
  answer = json({ verdict: 'deny', reason: 'pii.found' })
  t.same(await ask(), { verdict: 'deny', reason: 'pii.found' })
  answer = json({ verdict: 'rewrite', texts: [{ path: 'messages[1].content', text: 'TWO' }] })
  t.same(await ask(), { verdict: 'rewrite', texts: [{ path: 'messages[1].content', text: 'TWO' }] })
})

t.test('anything else is a failure that does not quote the answer', async (t) => {
  const cases: Array<[string, (res: ServerResponse) => void, RegExp]> = [
    ['another field', json({ verdict: 'allow', note: 'SECRET-ANSWER' }), /not allow, deny or rewrite/],
    ['another verdict', json({ verdict: 'maybe' }), /not allow, deny or rewrite/],
    [
      'a reason that is not a code',
      json({ verdict: 'deny', reason: 'SECRET-ANSWER here' }),
      /not allow, deny or rewrite/,
    ],
    ['an empty rewrite', json({ verdict: 'rewrite', texts: [] }), /not allow, deny or rewrite/],
    ['a path not sent', json({ verdict: 'rewrite', texts: [{ path: 'model', text: 'x' }] }), /path not sent/],
    ['a path twice', json({ verdict: 'rewrite', texts: [texts[0], texts[0]] }), /or twice/],
    ['not JSON', (res) => res.writeHead(200).end('SECRET-ANSWER'), /not JSON/],
    ['a 500', (res) => res.writeHead(500).end('SECRET-ANSWER'), /answered 500/],
    ['a redirect', (res) => res.writeHead(302, { location: 'http://x/' }).end(), /answered 302/],
    ['too long', (res) => res.writeHead(200).end('x'.repeat(5000)), /over 1024 bytes/],
  ]
  for (const [what, reply, problem] of cases) {
    answer = reply
    const said = (await ask()) as { verdict: string; problem?: string }
    t.equal(said.verdict, 'error', what)
    t.match(said.problem, problem, what)
    t.notOk(said.problem?.includes('SECRET-ANSWER'), `${what}: not quoted`)
  }
  answer = () => undefined // never answers
  t.same(await ask(), { verdict: 'timeout', problem: 'no answer within 300 ms' })
})

t.test('moderation: one result per text, else a failure', async (t) => {
  const check: ModerationCheck = {
    name: 'mod',
    type: 'moderation',
    backend: 'b',
    model: 'omni',
    flagged: true,
    thresholds: {},
    timeoutMs: 300,
    onError: 'open',
    replies: false,
  }
  const config = {
    backends: { b: { type: 'openai', baseUrl: `${url}/v1`, apiKeyEnv: 'K', headers: { 'x-extra': '1' } } },
    secrets: { backendKeys: { K: 'sk-mod' } },
  } as unknown as Parameters<typeof moderate>[2]
  const result = (flagged: boolean) => ({ flagged, categories: { 'harassment/threatening': flagged } })
  answer = json({ results: [result(false), result(true)] })
  t.same(await moderate(check, texts, config, agents), {
    verdict: 'deny',
    reason: 'harassment/threatening',
    path: 'messages[1].content',
  })
  t.match(bodies.at(-1)!.headers, { authorization: 'Bearer sk-mod', 'x-extra': '1' })
  answer = json({ results: [result(false)] })
  t.same(await moderate(check, texts, config, agents), { verdict: 'error', problem: '1 results for 2 texts' })
  answer = json({ results: [{ flagged: 'yes' }, { flagged: false }] })
  t.match(await moderate(check, texts, config, agents), { verdict: 'error', problem: /not in the moderation shape/ })
})
