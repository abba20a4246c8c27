// A webhook check: the call's texts, each with its path, POSTed to the operator's own
// service and signed exactly as Tollgate's webhooks are (webhooks/signing.ts, Standard
// Webhooks), so a receiver verifies both with one routine. The service answers one of
//   {"verdict": "allow"}
//   {"verdict": "deny", "reason": "<code>"}
//   {"verdict": "rewrite", "texts": [{"path": "<a path sent>", "text": "<its new text>"}]}
// checked strictly: any other answer (another field, a path that was not sent, a path
// twice, a reason that is not a plain code) is a failure, handled as the check's onError says.
import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { signedHeaders } from '../../webhooks/signing.ts'
import type { WebhookCheck } from './config.ts'
import type { Outcome, PlacedText } from './outcome.ts'
import { postJson, readAnswer, type Agents } from './post.ts'

const answerSchema = z.discriminatedUnion('verdict', [
  z.strictObject({ verdict: z.literal('allow') }),
  z.strictObject({ verdict: z.literal('deny'), reason: z.string().regex(/^[a-z0-9][a-z0-9_.-]{0,63}$/) }),
  z.strictObject({
    verdict: z.literal('rewrite'),
    texts: z
      .array(z.strictObject({ path: z.string().min(1), text: z.string() }))
      .min(1)
      .max(10_000),
  }),
])

/** What the check is told besides the texts: enough to decide, nothing of the caller's secrets. */
export interface CheckSubject {
  readonly policy: string
  /** What the texts are: the request's, or the model's reply. */
  readonly direction: 'request' | 'reply'
  readonly requestId: string
  readonly keyId: string
  readonly endpoint: string
  readonly model: string | null
}

/** The body a webhook check is sent (docs/guardrails.md shows it). */
export function checkBody(check: WebhookCheck, subject: CheckSubject, texts: readonly PlacedText[]): string {
  return JSON.stringify({
    type: 'guardrail.check',
    policy: subject.policy,
    check: check.name,
    direction: subject.direction,
    request_id: subject.requestId,
    key_id: subject.keyId,
    endpoint: subject.endpoint,
    model: subject.model,
    texts: texts.map((t) => ({ path: t.path, text: t.text })),
  })
}

/** Runs `check` over `texts` (at least one), signed with `secret`. */
export async function askWebhook(
  check: WebhookCheck,
  subject: CheckSubject,
  texts: readonly PlacedText[],
  secret: string,
  agents: Agents,
  nowSeconds: () => number = () => Math.floor(Date.now() / 1000),
): Promise<Outcome> {
  const body = checkBody(check, subject, texts)
  // A fresh id per ask: a check is never retried, so there is nothing for a receiver to dedupe.
  const headers = signedHeaders(secret, `gchk_${randomBytes(12).toString('hex')}`, nowSeconds(), body)
  const answer = await postJson(
    new URL(check.url),
    headers,
    body,
    { timeoutMs: check.timeoutMs, maxBytes: check.maxAnswerBytes },
    agents,
  )
  const read = readAnswer(answer, answerSchema, 'an answer that is not allow, deny or rewrite')
  if ('problem' in read) return { verdict: 'error', problem: read.problem }
  const said = read.value
  if (said.verdict !== 'rewrite') return said
  const sent = new Set(texts.map((t) => t.path))
  const seen = new Set<string>()
  for (const { path } of said.texts) {
    if (!sent.has(path) || seen.has(path))
      return { verdict: 'error', problem: 'a rewrite of a path not sent, or twice' }
    seen.add(path)
  }
  return said
}
