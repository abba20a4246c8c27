// The path of a RAG request, checked once: what follows /<service> is sent to the backend
// exactly as it arrived, so it must not be able to climb out of the service's prefix.
// Refused: dot segments (`.`, `..`, also percent-encoded, double-encoded or with `;`
// parameters), encoded slashes and backslashes, backslashes, empty segments (`//`),
// control characters and NUL, and malformed percent-encoding.
import { gatewayError, type GatewayError } from '../errors.ts'

const badPath = (): GatewayError => gatewayError('rag_bad_path')

export interface ServiceRoute {
  /** The route inside the service, as sent (raw), always starting with `/`. */
  readonly raw: string
  /** The same, percent-decoded once (what the backend routes on), for the route rules. */
  readonly decoded: string
  /** `?query` or ''. */
  readonly search: string
}

/** NUL, C0 controls and DEL. */
const hasControl = (s: string): boolean =>
  [...s].some((ch) => {
    const c = ch.charCodeAt(0)
    return c < 0x20 || c === 0x7f
  })
const MALFORMED_PERCENT = /%(?![0-9A-Fa-f]{2})/

/** The route of `url` under `/<segment>`, or a 400 refusal. */
export function serviceRoute(url: string, segment: string): ServiceRoute {
  const queryAt = url.indexOf('?')
  const path = queryAt === -1 ? url : url.slice(0, queryAt)
  const search = queryAt === -1 ? '' : url.slice(queryAt)
  const prefix = `/${segment}`
  if (!path.startsWith(`${prefix}/`) || hasControl(url) || url.includes('#')) throw badPath()
  const raw = path.slice(prefix.length)
  if (raw.includes('\\') || MALFORMED_PERCENT.test(raw)) throw badPath()
  const segments = raw.slice(1).split('/')
  const decoded: string[] = []
  for (const [i, s] of segments.entries()) {
    // Only the last segment may be empty: a trailing slash, as in /api/v1/sessions/.
    if (s === '' && i < segments.length - 1) throw badPath()
    decoded.push(checkedSegment(s))
  }
  return { raw, decoded: `/${decoded.join('/')}`, search }
}

/**
 * Decodes a segment as often as it still decodes (a backend or a proxy behind it might
 * decode again), refusing it if any stage could move up or across; answers the segment
 * decoded once, as the backend sees it.
 */
function checkedSegment(segment: string): string {
  let stage = segment
  let once: string | undefined
  for (let round = 0; ; round++) {
    const bare = stage.split(';', 1)[0] ?? ''
    if (bare === '.' || bare === '..' || stage.includes('/') || stage.includes('\\') || hasControl(stage))
      throw badPath()
    if (!stage.includes('%')) return once ?? segment
    // Still encoded after three rounds: nobody sends that in good faith.
    if (round === 3) throw badPath()
    let next: string
    try {
      next = decodeURIComponent(stage)
    } catch {
      // The raw form is checked well-formed; a later stage that no longer decodes is a literal %.
      if (once === undefined) throw badPath()
      return once
    }
    once ??= next
    if (next === stage) return once
    stage = next
  }
}
