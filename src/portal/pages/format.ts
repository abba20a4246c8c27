// How the pages write times, money, counts and key scopes.
import { formatAmount, formatMoney } from '../../keys/money.ts'
import type { KeyView } from '../../keys/service.ts'
import { html, type Html } from '../html.ts'

export function when(iso: string | null, empty = '—'): Html {
  if (iso === null) return html`${empty}`
  return html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`
}

/** An amount, as everywhere (src/keys/money.ts); its currency is in the column's header. */
export function amount(units: number): string {
  return formatAmount(units)
}

/** An amount with its currency beside it, where no header names it. */
export function money(units: number, currency: string): string {
  return formatMoney(units, currency)
}

export function count(n: number): string {
  return n.toLocaleString('en-US')
}

export function scopes(key: KeyView): string {
  const models = key.models === null ? 'all models' : key.models.join(', ')
  const endpoints = key.endpoints === null ? 'all endpoints' : key.endpoints.join(', ')
  return `${models}; ${endpoints}`
}

export function statusCell(status: string): Html {
  return html`<span class="status-${status}">${status}</span>`
}

/** Previous / next links of a list, keeping its other query parameters. */
export function pager(path: string, query: URLSearchParams, page: number, pages: number, total: number): Html {
  const link = (n: number): string => {
    const q = new URLSearchParams(query)
    q.set('page', String(n))
    return `${path}?${q.toString()}`
  }
  return html`<nav class="pager" aria-label="Pages">
${page > 1 ? html`<a href="${link(page - 1)}" rel="prev">Previous</a>` : ''}
<span>Page ${page} of ${pages} (${count(total)} in all)</span>
${page < pages ? html`<a href="${link(page + 1)}" rel="next">Next</a>` : ''}
</nav>`
}

/** The page number asked for, within 1..pages. */
export function pageOf(
  query: URLSearchParams,
  total: number,
  size: number,
): { page: number; pages: number; start: number } {
  const pages = Math.max(1, Math.ceil(total / size))
  const asked = Number.parseInt(query.get('page') ?? '1', 10)
  const page = Number.isFinite(asked) ? Math.min(pages, Math.max(1, asked)) : 1
  return { page, pages, start: (page - 1) * size }
}
