// The guardrails as the corridor uses them (corridor.ts, one step after intake): a
// prepared call's body checked under the policy of its key's tier (merged with its key's
// own), then refused, masked or let through, and every decision counted, written to the
// audit log (which detector, where: never the text) and told as a `guardrail.triggered`
// event. The policies are read from the configuration the call started on, so a reload
// changes them for the next calls.
import { Counter } from 'prom-client'
import type { AuditLog } from '../audit/log.ts'
import type { AuditActor } from '../audit/record.ts'
import type { Config } from '../config/schema.ts'
import { gatewayError, type GatewayError } from '../errors.ts'
import type { Events } from '../events/types.ts'
import type { PreparedCall, ReplyCheck } from '../inference/call.ts'
import { clientIp } from '../http/client-address.ts'
import type { RequestContext } from '../http/context.ts'
import type { Metrics } from '../observability/metrics.ts'
import type { GuardrailsConfig } from './config.ts'
import { createExternalChecks } from './external/run.ts'
import { compilePolicies, type CompiledPolicy, type PolicyBook } from './policy.ts'
import { checkWholeReply, replyWindow, type ReplyFinding } from './reply-check.ts'
import { unmasked } from './restore.ts'
import { scanBody, type Finding, type Verdict } from './scan.ts'
import { scanUpload, uploadBlockedError, uploadPurposeOf } from './uploads.ts'
import { scanRagPrompt } from './rag-prompt.ts'
import type { Identity } from '../auth/identity.ts'

/**
 * Who a screened call is for, for the records: the request's id, log and (for its address)
 * request; no request when the gateway runs a stored call itself (a batch's line).
 */
export type ScreenContext = Pick<RequestContext, 'id' | 'log'> & { readonly req?: RequestContext['req'] }

/** What the records say of a call: its endpoint, model and key, and the configuration it runs on. */
type CallOf = Pick<PreparedCall, 'runtime' | 'spec' | 'modelName' | 'principal' | 'resolved'>

export interface Guardrails {
  /** The call to run: `call` itself, or one whose body is masked. Throws guardrail_blocked. */
  screen(call: PreparedCall, ctx: ScreenContext): PreparedCall
  /** screen, then the policy's external checks (guardrails/external/): the call to run. Throws as screen does, or guardrail_unavailable. */
  check(call: PreparedCall, ctx: ScreenContext): Promise<PreparedCall>
  /** An upload of JSONL (files.create, purpose batch or fine-tune) checked line by line: throws guardrail_blocked. */
  screenUpload(call: CallOf & Pick<PreparedCall, 'body'>, ctx: ScreenContext): Promise<void>
  /**
   * A RAG chat prompt's body under `guardrails.rag` (of the configuration in force): the body
   * to send (masked, or `body` itself). Throws guardrail_blocked.
   */
  screenRagPrompt(
    body: Record<string, unknown>,
    who: Pick<Identity, 'userId' | 'username'>,
    ctx: ScreenContext,
    config: GuardrailsConfig,
  ): Record<string, unknown>
}

export interface GuardrailsDeps {
  readonly metrics?: Pick<Metrics, 'registry'>
  readonly audit?: Pick<AuditLog, 'record'>
  readonly events?: Events
}

/** What a guardrail decision is about, for its records. */
interface Subject {
  readonly actor: AuditActor
  readonly objectType: 'request' | 'reply' | 'upload' | 'rag_prompt'
  /** What matched, in the log line: 'a request', 'a reply', 'a RAG prompt'. */
  readonly told: string
  readonly endpoint: string
  readonly model?: string | null
  /** A reply's finding: the reply text the client already had. */
  readonly sentChars?: number
}

/** A key's call as a decision's subject: its request, its upload or (with what the client already had) its reply. */
function callSubject(call: CallOf, objectType: 'request' | 'reply' | 'upload', sentChars?: number): Subject {
  return {
    actor: { type: 'key', id: call.principal.keyId },
    objectType,
    told: objectType === 'reply' ? 'a reply' : 'a request',
    endpoint: call.spec.endpoint,
    model: call.modelName,
    ...(sentChars === undefined ? {} : { sentChars }),
  }
}

/** At most this many findings are written in one audit record (the count says how many there were). */
const RECORDED_FINDINGS = 50

export function createGuardrailsFromConfig(config: Config, deps: GuardrailsDeps = {}): Guardrails {
  const counter =
    deps.metrics === undefined
      ? undefined
      : new Counter({
          name: 'tollgate_guardrail_findings_total',
          help: 'Guardrail matches in requests, by policy, detector and the action taken (block, mask, flag).',
          labelNames: ['policy', 'detector', 'action'] as const,
          registers: [deps.metrics.registry],
        })
  // One compiled book per configuration in force (a reload brings a new frozen object).
  const books = new WeakMap<GuardrailsConfig, PolicyBook>()
  const bookOf = (config: GuardrailsConfig): PolicyBook => {
    let book = books.get(config)
    if (book === undefined) books.set(config, (book = compilePolicies(config)))
    return book
  }
  bookOf(config.guardrails) // the boot's policies compiled now, not on the first call
  const policyOf = (call: CallOf): CompiledPolicy | undefined =>
    bookOf(call.runtime.config.guardrails).policyFor(
      call.runtime.config.plans.tiers[call.resolved.tier]?.guardrails,
      call.principal.keyId,
    )
  const external = createExternalChecks({ ...deps, trustProxyHops: config.server.trustProxyHops })

  /** A decision counted, logged and audited, and (for a key's call) told as an event. */
  const record = (
    subject: Subject,
    ctx: ScreenContext,
    policy: string,
    verdict: Pick<Verdict, 'findings' | 'blocked'>,
  ): void => {
    const { findings } = verdict
    for (const f of findings) counter?.inc({ policy, detector: f.detector, action: f.action })
    const action = verdict.blocked !== undefined ? 'block' : findings.some((f) => f.action === 'mask') ? 'mask' : 'flag'
    const summary = {
      policy,
      action,
      endpoint: subject.endpoint,
      ...(subject.model === undefined ? {} : { model: subject.model }),
      findings: findings.slice(0, RECORDED_FINDINGS).map((f) => ({ ...f })),
      finding_count: findings.length,
      ...(subject.sentChars === undefined ? {} : { sent_chars: subject.sentChars }),
    }
    ctx.log.info({ guardrails: { policy, action, findings: findings.length } }, `guardrails: ${subject.told} matched`)
    deps.audit
      ?.record({
        actor: subject.actor,
        via: 'inference',
        action: `guardrail.${action}`,
        objectType: subject.objectType,
        objectId: ctx.id,
        before: null,
        after: summary,
        address: ctx.req === undefined ? '' : clientIp(ctx.req, config.server.trustProxyHops),
        requestId: ctx.id,
      })
      .catch((err: unknown) =>
        ctx.log.error(
          { err: (err as Error).message, action: `guardrail.${action}` },
          'audit: a guardrail decision could not be recorded',
        ),
      )
    // A RAG prompt's actor is a user: it has no key to tell of.
    if (subject.actor.type !== 'key') return
    deps.events?.fire('guardrail.triggered', {
      key_id: subject.actor.id,
      request_id: ctx.id,
      policy,
      action,
      endpoint: subject.endpoint,
      detectors: [...new Set(findings.map((f) => f.detector))],
      paths: [...new Set(findings.map((f) => f.path))].slice(0, RECORDED_FINDINGS),
    })
  }

  /** The reply's checks under `policy`: each finding recorded as a request's are, with what the client already had. */
  const replyCheckOf = (call: PreparedCall, ctx: ScreenContext, policy: CompiledPolicy): ReplyCheck => {
    const told = (finding: ReplyFinding): void => {
      const summary = { findings: [{ ...finding }], blocked: finding.action === 'block' ? finding : undefined }
      record(callSubject(call, 'reply', finding.sentChars), ctx, policy.name, summary)
    }
    const stop = (finding: ReplyFinding): GatewayError => {
      told(finding)
      return replyBlockedError(policy.name, finding)
    }
    return {
      whole(reply) {
        const blocked = checkWholeReply(reply, policy.replyRules, told)
        if (blocked !== undefined) throw stop(blocked)
      },
      gate() {
        const window = replyWindow(policy.replyRules, told)
        const passed = (out: string | ReplyFinding): string | GatewayError =>
          typeof out === 'string' ? out : stop(out)
        return {
          push: (bytes, text) => passed(window.push(bytes, text)),
          end: () => passed(window.end()),
          sent: () => window.sent(),
        }
      },
    }
  }

  /** `call` screened under `policy` (its tier's and key's, policyOf): the call to run. Throws guardrail_blocked. */
  const screenUnder = (call: PreparedCall, ctx: ScreenContext, policy: CompiledPolicy | undefined): PreparedCall => {
    if (call.body.kind !== 'json' || policy === undefined) return call
    const checked = policy.replyRules.length === 0 ? call : { ...call, replyCheck: replyCheckOf(call, ctx, policy) }
    if (policy.rules.length === 0) return checked
    const verdict = scanBody(call.body.value, policy)
    if (verdict.findings.length === 0) return checked
    record(callSubject(call, 'request'), ctx, policy.name, verdict)
    if (verdict.blocked !== undefined) throw blockedError(policy.name, verdict.blocked)
    if (verdict.body === call.body.value) return checked
    // A masked body is a new one: serialised from its value, never the bytes the client sent.
    const { masked } = verdict
    return {
      ...checked,
      body: { kind: 'json', value: { ...verdict.body } },
      ...(policy.restore && masked.size > 0 ? { unmask: (reply: unknown) => unmasked(reply, masked) } : {}),
    }
  }

  const guardrails: Guardrails = {
    async check(call, ctx) {
      const policy = policyOf(call)
      const screened = screenUnder(call, ctx, policy)
      return policy === undefined || policy.external.length === 0 ? screened : external.run(screened, ctx, policy)
    },
    screen: (call, ctx) => screenUnder(call, ctx, policyOf(call)),
    async screenUpload(call, ctx) {
      const { body } = call
      if (call.spec.endpoint !== 'files.create' || body.kind !== 'multipart') return
      const purpose = uploadPurposeOf(body)
      if (purpose === undefined) return
      const policy = policyOf(call)
      if (policy === undefined || policy.rules.length === 0) return
      const verdict = await scanUpload(body, purpose, policy)
      if (verdict.findings.length === 0) return
      record(callSubject(call, 'upload'), ctx, policy.name, verdict)
      if (verdict.blocked !== undefined) throw uploadBlockedError(policy.name, verdict.blocked)
    },
    screenRagPrompt(body, who, ctx, guardrails) {
      const policy = bookOf(guardrails).policyFor(guardrails.rag, '')
      if (policy === undefined || policy.rules.length === 0) return body
      const verdict = scanRagPrompt(body, policy)
      if (verdict.findings.length === 0) return body
      const subject: Subject = {
        actor: { type: 'user', id: who.userId, name: who.username },
        objectType: 'rag_prompt',
        told: 'a RAG prompt',
        endpoint: 'rag.query-pipeline',
      }
      record(subject, ctx, policy.name, verdict)
      if (verdict.blocked !== undefined) throw blockedError(policy.name, verdict.blocked)
      return verdict.body
    },
  }
  return guardrails
}

/** The corridor's guardrails step: the call to run (`call` itself when there are no guardrails). */
export async function screened(
  deps: { readonly guardrails?: Guardrails },
  ctx: ScreenContext,
  call: PreparedCall,
): Promise<PreparedCall> {
  return deps.guardrails === undefined ? call : deps.guardrails.check(call, ctx)
}

/** A reply that must not go out: a whole one's 400, or the error event that ends a stream. */
function replyBlockedError(policy: string, finding: ReplyFinding): GatewayError {
  return gatewayError('guardrail_blocked', {
    message: `The reply was stopped by the guardrail policy '${policy}': its '${finding.detector}' check matched in the model's reply${finding.sentChars > 0 ? ` after ${finding.sentChars} characters had been sent` : ''}. The matched text is not repeated here.`,
  })
}

/** The 400 of a blocked call: the policy, the detector and where; never the match. */
function blockedError(policy: string, finding: Finding): Error {
  return gatewayError('guardrail_blocked', {
    message: `The request was refused by the guardrail policy '${policy}': its '${finding.detector}' check matched at ${finding.path}. The matched text is not repeated here; remove it (or ask the gateway's operator about the policy) and send the request again.`,
    param: finding.path,
  })
}
