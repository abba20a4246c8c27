// Search filters on vector store files' attributes, as OpenAI evaluates them: a comparison
// of one attribute with a value (eq, ne, gt, gte, lt, lte, in, nin), or filters combined
// with and/or. A file without the attribute fails every comparison but `ne` and `nin`.
import type { AttributeValue, Comparison, Filter } from '../../api/vector-stores.ts'

type Attributes = Readonly<Record<string, AttributeValue>> | null

function compare(a: AttributeValue, b: string | number | boolean): number | undefined {
  if (typeof a === 'number' && typeof b === 'number') return a - b
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0
  return undefined
}

export function matchesFilter(attributes: Attributes, filter: Filter): boolean {
  if ('filters' in filter) {
    return filter.type === 'and'
      ? filter.filters.every((f) => matchesFilter(attributes, f))
      : filter.filters.some((f) => matchesFilter(attributes, f))
  }
  return compares(attributes, filter)
}

function compares(attributes: Attributes, filter: Comparison): boolean {
  const present = attributes !== null && Object.hasOwn(attributes, filter.key)
  const actual = present ? attributes[filter.key] : undefined
  const { value } = filter
  if (filter.type === 'in' || filter.type === 'nin') {
    const list: readonly unknown[] = Array.isArray(value) ? value : [value]
    const found = actual !== undefined && list.includes(actual)
    return filter.type === 'in' ? found : !found
  }
  if (Array.isArray(value)) return filter.type === 'ne'
  if (filter.type === 'eq') return actual === value
  if (filter.type === 'ne') return actual !== value
  if (actual === undefined) return false
  const order = compare(actual, value)
  if (order === undefined) return false
  switch (filter.type) {
    case 'gt':
      return order > 0
    case 'gte':
      return order >= 0
    case 'lt':
      return order < 0
    case 'lte':
      return order <= 0
  }
}
