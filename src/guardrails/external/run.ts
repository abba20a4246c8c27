// A policy's external checks run over a prepared call (after its built-in detectors, so a
// check is sent the masked text, never a value a `mask` took out): its texts gathered by the
// one text walk (text-fields.ts), each check asked in the policy's order, and its answer
// applied. `allow` goes on; `deny` refuses the call with guardrail_blocked (400) naming the
// policy and the check; `rewrite` puts the new texts into the body before the upstream sees
// it (the next check is sent them); a failure (no answer in time, an error status, an
// answer that does not validate) lets the call through under `onError: open` and refuses it
// with guardrail_unavailable (503) under `closed`. Every answer is counted with its latency;
// every deny, rewrite and failure is logged, audited and told as a `guardrail.triggered`
// event: which check and what it said, never the text.
import { Counter, Histogram } from 'prom-client'
import type { AuditLog } from '../../audit/log.ts'
import { gatewayError } from '../../errors.ts'
import type { Events } from '../../events/types.ts'
import { clientIp } from '../../http/client-address.ts'
import type { PreparedCall } from '../../inference/call.ts'
import type { Metrics } from '../../observability/metrics.ts'
import type { ScreenContext } from '../create.ts'
import type { CompiledPolicy } from '../policy.ts'
import { walkTexts, withTexts } from '../text-fields.ts'
import type { ExternalCheck } from './config.ts'
import { moderate } from './moderation.ts'
import type { Outcome } from './outcome.ts'
import { CheckFailure, createAgents } from './post.ts'
import { askWebhook } from './webhook.ts'

export interface ExternalChecks {
  /** `call` with its body as the checks left it; throws guardrail_blocked or guardrail_unavailable. */
  run(call: PreparedCall, ctx: ScreenContext, policy: CompiledPolicy): Promise<PreparedCall>
}

export interface ExternalDeps {
  readonly metrics?: Pick<Metrics, 'registry'>
  readonly audit?: Pick<AuditLog, 'record'>
  readonly events?: Events
  /** server.trustProxyHops of the boot's configuration: the audit record's address. */
  readonly trustProxyHops: number
}

interface Text {
  readonly path: string
  readonly steps: Array<string | number>
  text: string
}

export function createExternalChecks(deps: ExternalDeps): ExternalChecks {
  const registers = deps.metrics === undefined ? [] : [deps.metrics.registry]
  const answers = new Counter({
    name: 'tollgate_guardrail_external_total',
    help: 'Answers of guardrail external checks, by policy, check and verdict (allow, deny, rewrite, error, timeout).',
    labelNames: ['policy', 'check', 'verdict'] as const,
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

  const ask = async (call: PreparedCall, ctx: ScreenContext, policy: string, check: ExternalCheck, texts: Text[]) => {
    const placed = texts.map(({ path, text }) => ({ path, text }))
    try {
      if (check.type === 'moderation') return await moderate(check, placed, call.runtime.config, agents)
      const secret = call.runtime.config.secrets.guardrailSecrets?.[check.secretEnv]
      if (secret === undefined) return { verdict: 'error', problem: `${check.secretEnv} is not set` } as const
      const subject = {
        policy,
        requestId: ctx.id,
        keyId: call.principal.keyId,
        endpoint: call.spec.endpoint,
        model: call.modelName,
      }
      return await askWebhook(check, subject, placed, secret, agents)
    } catch (err) {
      if (err instanceof CheckFailure) return { verdict: err.kind, problem: err.message } as const
      return { verdict: 'error', problem: 'the check failed' } as const
    }
  }

  const record = (call: PreparedCall, ctx: ScreenContext, policy: string, check: ExternalCheck, said: Said): void => {
    const { outcome, ms } = said
    const action = outcomeAction(outcome, check)
    const paths =
      outcome.verdict === 'rewrite'
        ? outcome.texts.map((t) => t.path)
        : outcome.verdict === 'deny' && outcome.path !== undefined
          ? [outcome.path]
          : []
    const about = {
      name: check.name,
      type: check.type,
      verdict: outcome.verdict,
      ...(outcome.verdict === 'deny' ? { reason: outcome.reason } : {}),
      ...(outcome.verdict === 'error' || outcome.verdict === 'timeout'
        ? { problem: outcome.problem, on_error: check.onError }
        : {}),
      ms: Math.round(ms),
    }
    const failed = outcome.verdict === 'error' || outcome.verdict === 'timeout'
    ctx.log[failed ? 'warn' : 'info']({ guardrails: { policy, action, check: about } }, 'guardrails: an external check')
    deps.audit
      ?.record({
        actor: { type: 'key', id: call.principal.keyId },
        via: 'inference',
        action: failed ? 'guardrail.error' : `guardrail.${action}`,
        objectType: 'request',
        objectId: ctx.id,
        before: null,
        after: { policy, action, endpoint: call.spec.endpoint, model: call.modelName, check: about, paths },
        address: clientIp(ctx.req, deps.trustProxyHops),
        requestId: ctx.id,
      })
      .catch((err: unknown) =>
        ctx.log.error({ err: (err as Error).message }, 'audit: a guardrail decision could not be recorded'),
      )
    deps.events?.fire('guardrail.triggered', {
      key_id: call.principal.keyId,
      request_id: ctx.id,
      policy,
      action,
      endpoint: call.spec.endpoint,
      detectors: [],
      paths,
      check: {
        name: check.name,
        verdict: outcome.verdict,
        ...(outcome.verdict === 'deny' ? { reason: outcome.reason } : {}),
      },
    })
  }

  return {
    async run(call, ctx, policy) {
      if (call.body.kind !== 'json' || policy.external.length === 0) return call
      let body = call.body.value
      const texts: Text[] = []
      walkTexts(body, (v) => {
        if (v.text !== '') texts.push({ path: v.where(), steps: v.steps(), text: v.text })
      })
      if (texts.length === 0) return call
      for (const check of policy.external) {
        const started = performance.now()
        const outcome = await ask(call, ctx, policy.name, check, texts)
        const ms = performance.now() - started
        answers.inc({ policy: policy.name, check: check.name, verdict: outcome.verdict })
        latency.observe({ policy: policy.name, check: check.name }, ms / 1000)
        if (outcome.verdict === 'allow') continue
        record(call, ctx, policy.name, check, { outcome, ms })
        if (outcome.verdict === 'deny') throw deniedError(policy.name, check, outcome.reason, outcome.path)
        if (outcome.verdict === 'rewrite') {
          const byPath = new Map(outcome.texts.map((t) => [t.path, t.text]))
          const edits = texts.filter((t) => byPath.has(t.path))
          for (const t of edits) t.text = byPath.get(t.path)!
          body = withTexts(body, edits)
          continue
        }
        if (check.onError === 'closed') throw unavailableError(policy.name, check, outcome.problem)
      }
      // A rewritten body is a new one: serialised from its value, never the bytes the client sent.
      return body === call.body.value ? call : { ...call, body: { kind: 'json', value: body } }
    },
  }
}

interface Said {
  readonly outcome: Exclude<Outcome, { verdict: 'allow' }>
  readonly ms: number
}

/** The action a decision is recorded as: a deny or a closed failure blocked, a rewrite rewrote, an open failure let through (flag). */
function outcomeAction(outcome: Said['outcome'], check: ExternalCheck): 'block' | 'rewrite' | 'flag' {
  if (outcome.verdict === 'deny') return 'block'
  if (outcome.verdict === 'rewrite') return 'rewrite'
  return check.onError === 'closed' ? 'block' : 'flag'
}

const KINDS = { moderation: 'moderation check', webhook: 'webhook check' } as const

function deniedError(policy: string, check: ExternalCheck, reason: string, path: string | undefined): Error {
  return gatewayError('guardrail_blocked', {
    message: `The request was refused by the guardrail policy '${policy}': its external ${KINDS[check.type]} '${check.name}' denied it (${reason})${path === undefined ? '' : ` at ${path}`}. The text is not repeated here; change it (or ask the gateway's operator about the policy) and send the request again.`,
    ...(path === undefined ? {} : { param: path }),
  })
}

function unavailableError(policy: string, check: ExternalCheck, problem: string): Error {
  return gatewayError('guardrail_unavailable', {
    message: `The request could not be checked: the guardrail policy '${policy}' requires its external ${KINDS[check.type]} '${check.name}', which failed (${problem}). This is not a fault of the request; try again shortly, or tell the gateway's operator.`,
  })
}
