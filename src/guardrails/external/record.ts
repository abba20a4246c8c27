// An external check's decision written down, as the detectors' are (guardrails/create.ts):
// a log line, an audit record (actor the key, object the request or its reply) and a
// `guardrail.triggered` event. Which check, what it said (a deny's reason code, a failure's
// problem, the paths a rewrite changed) and how long it took; never a text.
import type { AuditLog } from '../../audit/log.ts'
import type { Events } from '../../events/types.ts'
import { clientIp } from '../../http/client-address.ts'
import type { PreparedCall } from '../../inference/call.ts'
import type { ScreenContext } from '../create.ts'
import type { ExternalCheck } from './config.ts'
import type { Outcome } from './outcome.ts'

export type Direction = 'request' | 'reply'

export interface RecordDeps {
  readonly audit?: Pick<AuditLog, 'record'>
  readonly events?: Events
  /** server.trustProxyHops of the boot's configuration: the audit record's address. */
  readonly trustProxyHops: number
}

/** An answer other than allow (allows are counted only), and how long it took. */
export interface Said {
  readonly outcome: Exclude<Outcome, { verdict: 'allow' }>
  readonly ms: number
}

/** The action a decision is recorded as: a deny or a closed failure blocked, a rewrite rewrote, an open failure let through (flag). */
export function actionOf(outcome: Said['outcome'], check: ExternalCheck): 'block' | 'rewrite' | 'flag' {
  if (outcome.verdict === 'deny') return 'block'
  if (outcome.verdict === 'rewrite') return 'rewrite'
  return check.onError === 'closed' ? 'block' : 'flag'
}

export function recordDecision(
  deps: RecordDeps,
  at: {
    readonly call: PreparedCall
    readonly ctx: ScreenContext
    readonly policy: string
    readonly direction: Direction
  },
  check: ExternalCheck,
  said: Said,
): void {
  const { call, ctx, policy, direction } = at
  const { outcome } = said
  const action = actionOf(outcome, check)
  const failed = outcome.verdict === 'error' || outcome.verdict === 'timeout'
  // No request when the gateway runs a stored call itself (a batch's line, on branch guardwalk).
  const req: ScreenContext['req'] | undefined = ctx.req
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
    ...(failed ? { problem: outcome.problem, on_error: check.onError } : {}),
    ms: Math.round(said.ms),
  }
  ctx.log[failed ? 'warn' : 'info'](
    { guardrails: { policy, action, direction, check: about } },
    `guardrails: an external check on a ${direction}`,
  )
  deps.audit
    ?.record({
      actor: { type: 'key', id: call.principal.keyId },
      via: 'inference',
      action: failed ? 'guardrail.error' : `guardrail.${action}`,
      objectType: direction,
      objectId: ctx.id,
      before: null,
      after: { policy, action, endpoint: call.spec.endpoint, model: call.modelName, check: about, paths },
      address: req === undefined ? '' : clientIp(req, deps.trustProxyHops),
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
