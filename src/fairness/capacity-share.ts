// Fair shares on /v2 (docs/limits.md "Fair shares"). A /v2 call does not wait, so the
// capacity line's rule (the party with the lowest counter goes next) has nothing to order.
// What /v2 does instead is the rule flex already follows at a deployment's capacity: a call
// of a party above its share (contention.ts: its counter is above that of another party
// that wants room now) may fill only 1 − reserve of each deployment's declared rpm, tpm and
// maxConcurrent, so the last of a contended deployment is kept for the parties below their
// share. Once a deployment is that full, such a call is refused (429 fair_share_exceeded,
// with the capacity's retry hint) and the room that frees goes to the party below its share;
// as it is served its counter passes the other's and the roles swap, so over a busy stretch
// the counters stay level and the served tokens follow the weights.
//
// It costs nothing on the hot path: whether the party is above its share is read from the
// last flush of charges (no store call), and the cut rides on the capacity store's own
// acquire, which a deployment with declared limits makes anyway (none for one without).
// Uncontended nobody is refused for share: a party alone is above nobody, and a deployment
// with more than the reserve free admits everyone. A deployment's learned limits (what its
// upstream taught) are not cut, as for flex: only declared ones keep room back.
import { GatewayError, gatewayError } from '../errors.ts'
import type { FairShares } from './shares.ts'

/** What a call's cut is read from: its party (fairness/vtc.ts partyOf), tier, model and estimate (a PreparedCall is one). */
export interface CutCall {
  readonly principal: { readonly keyId: string; readonly owner: string }
  readonly resolved: { readonly tier: string; readonly model: string }
  readonly estimate: { readonly inputTokens: number; readonly outputTokens: number }
}

export interface FairCapacity {
  /**
   * The share of each deployment's declared capacity a /v2 call may fill for its party's
   * sake: 1 − reserve when its party is above its share (not counting the call's own
   * charge), undefined otherwise (no cut).
   */
  shareOf(call: CutCall): number | undefined
}

/** None when `reserve` is 0 (the setting `queue.fairShareReserve`): /v2 is then first come first served. */
export function createFairCapacity(shares: Pick<FairShares, 'above'>, reserve: number): FairCapacity | undefined {
  if (!(reserve > 0)) return undefined
  const share = 1 - Math.min(reserve, 1)
  return {
    // The call's own charge is taken off as its estimate; a call the learned reservations
    // (reservations/) charged less for ranks its party a little lower than it is, never higher.
    shareOf({ principal, resolved, estimate }) {
      const request = { keyId: principal.keyId, owner: principal.owner, tier: resolved.tier, model: resolved.model }
      return shares.above(request, estimate.inputTokens + estimate.outputTokens) ? share : undefined
    },
  }
}

/** The share a call may fill: the lesser of its class's (priority/classes.ts capacityShare) and its party's. */
export const cutShare = (classShare: number, fair: number | undefined): number =>
  fair === undefined ? classShare : Math.min(classShare, fair)

/**
 * A refusal on the share (deployment-pick.ts answers it flex_capacity) when the party's cut
 * was the lesser: fair_share_exceeded, with the same retry hint. Anything else is unchanged
 * (the deployments full for everyone stay upstream_capacity).
 */
export function fairRefusal(error: unknown, classShare: number, fair: number | undefined): unknown {
  if (fair === undefined || fair >= classShare) return error
  if (!(error instanceof GatewayError) || error.errorName !== 'flex_capacity') return error
  const headers: Record<string, string> = {}
  for (const name of ['retry-after', 'retry-after-ms']) {
    const value = error.headers[name]
    if (value !== undefined) headers[name] = value
  }
  return gatewayError('fair_share', { headers })
}
