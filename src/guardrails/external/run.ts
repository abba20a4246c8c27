// A policy's external checks run over a prepared call (after its built-in detectors, so a
// check is sent the masked text, never a value a `mask` took out): its texts gathered by the
// one text walk (text-fields.ts), each check asked in the policy's order, and its answer
// applied. `allow` goes on; `deny` refuses the call with guardrail_blocked (400) naming the
// policy and the check; `rewrite` puts the new texts into the body before the upstream sees
// it (the next check is sent them); a failure (no answer in time, an error status, an
// answer that does not validate) lets the call through under `onError: open` and refuses it
// with guardrail_unavailable (503) under `closed`. Checks with `replies: true` judge a whole
// (not streamed) reply the same way before it goes out. Every answer is counted with its
// latency; every other decision is recorded (record.ts): which check and what it said,
// never the text.
import { Counter, Histogram } from 'prom-client'
import type { PreparedCall } from '../../inference/call.ts'
import type { Metrics } from '../../observability/metrics.ts'
import type { ScreenContext } from '../create.ts'
import type { CompiledPolicy } from '../policy.ts'
import { walkTexts, withTexts } from '../text-fields.ts'
import type { ExternalCheck } from './config.ts'
import { deniedError, unavailableError } from './errors.ts'
import { moderate } from './moderation.ts'
import type { Outcome } from './outcome.ts'
import { CheckFailure, createAgents } from './post.ts'
import { recordDecision, type Direction, type RecordDeps } from './record.ts'
import { replyTextsAt, type ReplyText as SitedText } from './reply-texts.ts'
import { askWebhook } from './webhook.ts'

export interface ExternalChecks {
  /** `call` with its body as the checks left it (and its reply's checks); throws guardrail_blocked or guardrail_unavailable. */
  run(call: PreparedCall, ctx: ScreenContext, policy: CompiledPolicy): Promise<PreparedCall>
}

export interface ExternalDeps extends RecordDeps {
  readonly metrics?: Pick<Metrics, 'registry'>
}

export function createExternalChecks(deps: ExternalDeps): ExternalChecks {
  const registers = deps.metrics === undefined ? [] : [deps.metrics.registry]
  const answers = new Counter({
    name: 'tollgate_guardrail_external_total',
    help: 'Answers of guardrail external checks, by policy, check, direction (request, reply) and verdict (allow, deny, rewrite, error, timeout).',
    labelNames: ['policy', 'check', 'direction', 'verdict'] as const,
    registers,
  })
  const latency = new Histogram({
    name: 'tollgate_guardrail_external_seconds',
    help: 'How long a guardrail external check took to answer (or to fail), by policy and check.',
    labelNames: ['policy', 'check'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  })
  const agents = createAgents()

  interface At {
    readonly call: PreparedCall
    readonly ctx: ScreenContext
    readonly policy: string
    readonly direction: Direction
  }

  const ask = async (at: At, check: ExternalCheck, texts: readonly SitedText[]): Promise<Outcome> => {
    const { call, ctx } = at
    const placed = texts.map(({ path, text }) => ({ path, text }))
    try {
      if (check.type === 'moderation') return await moderate(check, placed, call.runtime.config, agents)
      const secret = call.runtime.config.secrets.guardrailSecrets?.[check.secretEnv]
      if (secret === undefined) return { verdict: 'error', problem: `${check.secretEnv} is not set` }
      const subject = {
        policy: at.policy,
        direction: at.direction,
        requestId: ctx.id,
        keyId: call.principal.keyId,
        endpoint: call.spec.endpoint,
        model: call.modelName,
      }
      return await askWebhook(check, subject, placed, secret, agents)
    } catch (err) {
      if (err instanceof CheckFailure) return { verdict: err.kind, problem: err.message }
      return { verdict: 'error', problem: 'the check failed' }
    }
  }

  /**
   * `checks` over `texts` of `value`, in order: the value with every rewrite applied (the
   * texts updated as they go), or a throw. Unchanged: `value` itself.
   */
  const judge = async (
    at: At,
    checks: readonly ExternalCheck[],
    value: Readonly<Record<string, unknown>>,
    texts: SitedText[],
    failedOpen?: () => void,
  ): Promise<Readonly<Record<string, unknown>>> => {
    let out = value
    for (const check of checks) {
      const started = performance.now()
      const outcome = await ask(at, check, texts)
      const ms = performance.now() - started
      answers.inc({ policy: at.policy, check: check.name, direction: at.direction, verdict: outcome.verdict })
      latency.observe({ policy: at.policy, check: check.name }, ms / 1000)
      if (outcome.verdict === 'allow') continue
      recordDecision(deps, at, check, { outcome, ms })
      if (outcome.verdict === 'deny') throw deniedError(at, check, outcome.reason, outcome.path)
      if (outcome.verdict === 'rewrite') {
        const byPath = new Map(outcome.texts.map((t) => [t.path, t.text]))
        const edits = texts.filter((t) => byPath.has(t.path))
        for (const t of edits) t.text = byPath.get(t.path)!
        out = withTexts(out, edits)
      } else if (check.onError === 'closed') throw unavailableError(at, check, outcome.problem)
      else failedOpen?.()
    }
    return out
  }

  /**
   * `call` with the whole-reply step of `checks` (the reply rewritten, or undefined when it goes
   * out as it is), and a mark once a check failed open on it: that reply went out unjudged, and
   * the response cache must not keep it for callers it was never judged for.
   */
  const withReplyJudge = (
    call: PreparedCall,
    ctx: ScreenContext,
    policy: string,
    checks: readonly ExternalCheck[],
  ): PreparedCall => {
    let unjudged = false
    const replyExternal = async (reply: unknown): Promise<unknown> => {
      if (typeof reply !== 'object' || reply === null || Array.isArray(reply)) return undefined
      const texts = replyTextsAt(reply)
      if (texts.length === 0) return undefined
      const value = reply as Readonly<Record<string, unknown>>
      const judged = await judge({ call, ctx, policy, direction: 'reply' }, checks, value, texts, () => {
        unjudged = true
      })
      return judged === value ? undefined : judged
    }
    return { ...call, replyExternal, replyUnjudged: () => unjudged }
  }

  return {
    async run(call, ctx, policy) {
      if (call.body.kind !== 'json' || policy.external.length === 0) return call
      const onReplies = policy.external.filter((c) => c.replies)
      const replying: PreparedCall = onReplies.length === 0 ? call : withReplyJudge(call, ctx, policy.name, onReplies)
      const texts: SitedText[] = []
      walkTexts(call.body.value, (v) => {
        if (v.text !== '') texts.push({ path: v.where(), steps: v.steps(), text: v.text })
      })
      if (texts.length === 0) return replying
      const at = { call, ctx, policy: policy.name, direction: 'request' as const }
      const body = await judge(at, policy.external, call.body.value, texts)
      // A rewritten body is a new one: serialised from its value, never the bytes the client sent.
      return body === call.body.value ? replying : { ...replying, body: { kind: 'json', value: { ...body } } }
    },
  }
}
