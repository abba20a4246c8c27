// What a call that did not end with an upstream's whole reply is charged, by how it ended
// (docs/backends.md, "What a client sees when an upstream fails"):
// - No upstream acted on it: the gateway refused it itself (every deployment full or
//   refusing: upstream_capacity), reached none (upstream_unreachable), or its own credential
//   was refused (upstream_auth_failed). Nothing: its reservation goes back whole, its request
//   point too, and no usage row counts it.
// - The gateway stopped waiting for an upstream that had the request (upstream_timeout): the
//   upstream may finish it and bill it all the same, so the call is charged at least the
//   input it reserved, and the output that was relayed.
import type { Usage } from '../backends/port.ts'
import { GatewayError, type ErrorName } from '../errors.ts'

const NOT_ACTED_ON: ReadonlySet<ErrorName> = new Set([
  'upstream_capacity',
  'upstream_unreachable',
  'upstream_auth_failed',
  'fair_share',
  'flex_capacity',
])

/** Whether `error` ended a call before any upstream acted on it. */
export function unserved(error: unknown): boolean {
  return error instanceof GatewayError && NOT_ACTED_ON.has(error.errorName)
}

/** What a call is charged: its usage, with at least its reserved input once it timed out upstream. */
export function chargedUsage(usage: Usage, error: unknown, reserved: Usage): Usage {
  if (!(error instanceof GatewayError) || error.errorName !== 'upstream_timeout') return usage
  return { ...usage, inputTokens: Math.max(usage.inputTokens, reserved.inputTokens) }
}
