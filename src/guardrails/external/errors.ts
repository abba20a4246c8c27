// The two refusals of an external check, in words a caller can act on: a deny (400
// guardrail_blocked: the text, which the caller can change) and a closed failure (503
// guardrail_unavailable: the gateway's side, to try again). Each names the policy, the check
// and what happened; never the text.
import { gatewayError } from '../../errors.ts'
import type { ExternalCheck } from './config.ts'
import type { Direction } from './record.ts'

const KINDS = { moderation: 'moderation check', webhook: 'webhook check' } as const

interface Where {
  readonly policy: string
  readonly direction: Direction
}

export function deniedError(at: Where, check: ExternalCheck, reason: string, path: string | undefined): Error {
  const what = `its external ${KINDS[check.type]} '${check.name}' denied it (${reason})${path === undefined ? '' : ` at ${path}`}`
  return gatewayError('guardrail_blocked', {
    message:
      at.direction === 'request'
        ? `The request was refused by the guardrail policy '${at.policy}': ${what}. The text is not repeated here; change it (or ask the gateway's operator about the policy) and send the request again.`
        : `The reply was stopped by the guardrail policy '${at.policy}': ${what}. The text is not repeated here.`,
    ...(path === undefined || at.direction === 'reply' ? {} : { param: path }),
  })
}

export function unavailableError(at: Where, check: ExternalCheck, problem: string): Error {
  return gatewayError('guardrail_unavailable', {
    message: `The ${at.direction} could not be checked: the guardrail policy '${at.policy}' requires its external ${KINDS[check.type]} '${check.name}', which failed (${problem}). This is not a fault of the request; try again shortly, or tell the gateway's operator.`,
  })
}
