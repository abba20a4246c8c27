// Masked values given back: a whole reply to the call that sent them has each placeholder
// ([EMAIL_1]) the model repeated replaced by the value it stands for, when the policy says
// `restore`. The upstream never saw the values; the caller gets its own text back, nobody
// else's (the map is the call's own). Streams keep their placeholders.

/** A placeholder as scan.ts writes them. */
const PLACEHOLDER = /\[[A-Z][A-Z0-9_]*_\d+\]/g

/** `reply` with every placeholder of `masked` in its strings replaced by its value (a copy where something changed). */
export function unmasked(reply: unknown, masked: ReadonlyMap<string, string>): unknown {
  if (typeof reply === 'string')
    return reply.includes('[') ? reply.replace(PLACEHOLDER, (p) => masked.get(p) ?? p) : reply
  if (Array.isArray(reply)) return reply.map((item: unknown) => unmasked(item, masked))
  if (typeof reply !== 'object' || reply === null) return reply
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(reply)) out[key] = unmasked(value, masked)
  return out
}

type JsonTransform = (status: number, body: unknown) => Promise<unknown>

/** The reply's JSON transform with the call's reply check and unmasking after it (only a success); `transform` when there is neither. */
export function unmasking(
  transform: JsonTransform | undefined,
  call: {
    readonly unmask?: (reply: unknown) => unknown
    readonly replyCheck?: { whole(reply: unknown): void }
    readonly replyExternal?: (reply: unknown) => Promise<unknown>
  },
): JsonTransform | undefined {
  const { unmask, replyCheck, replyExternal } = call
  if (unmask === undefined && replyCheck === undefined && replyExternal === undefined) return transform
  return async (status, body) => {
    const transformed = transform === undefined ? undefined : await transform(status, body)
    if (status >= 300) return transformed
    // Checked before the values are put back: the caller's own masked values are not the reply's.
    replyCheck?.whole(transformed ?? body)
    // The external checks (guardrails/external/) after the detectors, on placeholders still: a rewrite may change the reply.
    const judged = (await replyExternal?.(transformed ?? body)) ?? transformed
    return unmask === undefined ? judged : unmask(judged ?? body)
  }
}
