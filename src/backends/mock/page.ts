// Cursor pagination as OpenAI lists do it: `after` is the id of the last object seen (the
// page starts after it), `before` the id of the first object of the page seen next (the
// page ends before it), `limit` caps the page, and `has_more` tells the SDK's auto-pager
// to ask again.
import { invalidRequest } from './errors.ts'
import { optionalInteger, optionalString } from './params.ts'

export interface Page<T> {
  readonly object: 'list'
  readonly data: readonly T[]
  readonly has_more: boolean
}

function indexOf<T extends { readonly id: string }>(ordered: readonly T[], id: string, param: string): number {
  const at = ordered.findIndex((item) => item.id === id)
  if (at === -1) throw invalidRequest(`Invalid '${param}': no object with this id in the list.`, param)
  return at
}

export function paginate<T extends { readonly id: string }>(
  ordered: readonly T[],
  query: Readonly<Record<string, unknown>>,
  limits: { readonly default: number; readonly max: number },
): Page<T> {
  const limit = optionalInteger(query, 'limit', { min: 1, max: limits.max }) ?? limits.default
  const after = optionalString(query, 'after')
  const before = optionalString(query, 'before')
  const from = after === undefined ? 0 : indexOf(ordered, after, 'after') + 1
  const to = before === undefined ? ordered.length : indexOf(ordered, before, 'before')
  // With `before` alone the page is the `limit` objects just before it; otherwise the first ones after `after`.
  const backwards = before !== undefined && after === undefined
  const start = backwards ? Math.max(from, to - limit) : from
  const end = Math.max(start, Math.min(to, start + limit))
  // Backwards, "more" is what lies further back.
  return { object: 'list', data: ordered.slice(start, end), has_more: backwards ? start > from : end < to }
}

/** A page with the first and last ids OpenAI's lists carry. */
export function listPage<T extends { readonly id: string }>(
  page: Page<T>,
): Page<T> & { first_id: string | null; last_id: string | null } {
  return { ...page, first_id: page.data[0]?.id ?? null, last_id: page.data.at(-1)?.id ?? null }
}
