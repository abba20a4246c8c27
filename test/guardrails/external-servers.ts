// Two fake external check services on loopback for test/guardrails/external.test.ts, each
// recording what it was sent and deciding by marker words in the texts:
// - a moderation endpoint (OpenAI's POST /moderations shape): KILL is flagged (violence),
//   HATE is not flagged but scores 0.6 on hate;
// - a guardrail webhook: DENY is denied (reason contract_terms), REWRITE is rewritten (the
//   word replaced by "[dlp-redacted]"), MALFORMED gets an answer outside the contract, SLOW
//   gets no answer at all; anything else is allowed. It verifies every request the way a
//   Standard Webhooks receiver does (helpers/webhook-receiver.ts, written from the spec).
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { verifyStandardWebhook } from '../helpers/webhook-receiver.ts'

export interface Recorded {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: string
  readonly json: Record<string, unknown>
}

export interface FakeService {
  readonly url: string
  readonly requests: Recorded[]
  close(): Promise<void>
}

async function serve(answer: (r: Recorded, res: ServerResponse) => void): Promise<FakeService> {
  const requests: Recorded[] = []
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const r: Recorded = {
        path: req.url ?? '',
        headers: req.headers,
        body,
        json: JSON.parse(body) as Record<string, unknown>,
      }
      requests.push(r)
      answer(r, res)
    })
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise((done) => {
        server.close(() => done())
        server.closeAllConnections()
      }),
  }
}

const json = (res: ServerResponse, value: unknown): void => {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value))
}

export function startModeration(): Promise<FakeService> {
  return serve((r, res) => {
    const input = r.json.input as string[]
    json(res, {
      id: 'modr-1',
      model: r.json.model,
      results: input.map((text) => ({
        flagged: text.includes('KILL'),
        categories: { violence: text.includes('KILL'), hate: false },
        category_scores: { violence: text.includes('KILL') ? 0.93 : 0.01, hate: text.includes('HATE') ? 0.6 : 0.02 },
      })),
    })
  })
}

export interface FakeWebhook extends FakeService {
  readonly secret: string
  /** Whether each request it got was signed with its secret, in order. */
  readonly verified: boolean[]
}

export async function startCheckWebhook(): Promise<FakeWebhook> {
  const secret = `whsec_${randomBytes(32).toString('base64')}`
  const verified: boolean[] = []
  const service = await serve((r, res) => {
    verified.push(verifyStandardWebhook(secret, r.headers, r.body) === null)
    const texts = r.json.texts as Array<{ path: string; text: string }>
    const all = texts.map((t) => t.text).join('\n')
    if (all.includes('SLOW')) return // never answers
    if (all.includes('MALFORMED')) return json(res, { verdict: 'maybe', texts: 'all of them' })
    if (all.includes('DENY')) return json(res, { verdict: 'deny', reason: 'contract_terms' })
    if (all.includes('REWRITE'))
      return json(res, {
        verdict: 'rewrite',
        texts: texts
          .filter((t) => t.text.includes('REWRITE'))
          .map((t) => ({ path: t.path, text: t.text.replaceAll('REWRITE', '[dlp-redacted]') })),
      })
    json(res, { verdict: 'allow' })
  })
  return { ...service, url: `${service.url}/check`, secret, verified }
}
