// Usage over a chosen range, in total or for one key: totals, charts drawn on the server,
// and the same numbers as tables; a CSV of the rows.
import type { KeyView } from '../../keys/service.ts'
import { stackedBars } from '../chart.ts'
import { html, type Html } from '../html.ts'
import { layout, scrolling, type Viewer } from '../layout.ts'
import type { UsageReport } from '../usage-report.ts'
import type { BudgetStatus } from '../../limits/port.ts'
import { budgetsSection } from './budgets.ts'
import { amount, count, money } from './format.ts'

// The prompt cache's reads and writes come after the columns they are parts of (input
// tokens, cost), so the columns before them read as they always did; the requests the
// response cache answered (src/cache/) and the lines of batches (src/batches/) last, as in
// the CSV.
function totalsRow(r: Record<string, string | number>): Html {
  return html`<td class="num">${count(Number(r.requests))}</td><td class="num">${count(Number(r.input_tokens))}</td><td class="num">${count(Number(r.output_tokens))}</td><td class="num">${amount(Number(r.cost))}</td><td class="num">${count(Number(r.cache_read_tokens ?? 0))}</td><td class="num">${count(Number(r.cache_write_tokens ?? 0))}</td><td class="num">${amount(Number(r.cache_read_cost ?? 0))}</td><td class="num">${amount(Number(r.cache_write_cost ?? 0))}</td><td class="num">${count(Number(r.cached_requests ?? 0))}</td><td class="num">${count(Number(r.batch_requests ?? 0))}</td><td class="num">${amount(Number(r.batch_cost ?? 0))}</td>`
}

const numHeads = (currency: string): Html =>
  html`<th scope="col" class="num">Requests</th><th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th><th scope="col" class="num">Cost (${currency})</th><th scope="col" class="num" title="Input tokens read from the upstream's prompt cache">Cache reads</th><th scope="col" class="num" title="Input tokens written to the upstream's prompt cache">Cache writes</th><th scope="col" class="num">Cache read cost (${currency})</th><th scope="col" class="num">Cache write cost (${currency})</th><th scope="col" class="num" title="Of the requests, those answered from Tollgate's response cache">Cached replies</th><th scope="col" class="num" title="Of the requests, the lines of batches">Batch lines</th><th scope="col" class="num" title="Of the cost, the batch lines', at the tier's batch price">Batch cost (${currency})</th>`

export function usagePage(
  viewer: Viewer,
  keys: readonly KeyView[],
  selected: KeyView | null,
  report: UsageReport,
  csvUrl: string,
  currency: string,
  budgets: readonly BudgetStatus[] = [],
  /** The keys whose budgets those are: a key's own budget row names its key. */
  budgetedKeys: readonly KeyView[] = [],
): Html {
  const NUM_HEADS = numHeads(currency)
  const labels = report.days.map((d) => d.day)
  const name = (id: string): string => {
    const key = keys.find((k) => k.id === id)
    return key === undefined ? id : `${key.name ?? '(unnamed)'} (${key.prefix}…)`
  }
  const active = report.days.filter((d) => d.requests > 0)
  return layout(
    selected === null ? 'Usage' : `Usage of ${selected.name ?? selected.prefix}`,
    html`
<form class="inline" method="get" action="/portal/usage" aria-label="Range and key">
<label for="usage-key">Key <span class="hint">(those used in the range)</span> <select id="usage-key" name="key"><option value="">All my keys</option>${keys.map((k) => html`<option value="${k.id}"${selected?.id === k.id ? html` selected` : ''}>${k.name ?? '(unnamed)'} (${k.prefix}…)</option>`)}</select></label>
<label for="usage-from">From <input id="usage-from" name="from" type="date" value="${report.from}" required></label>
<label for="usage-to">To <input id="usage-to" name="to" type="date" value="${report.to}" required></label>
<button type="submit">Show</button>
<a class="button" href="${csvUrl}" download>Download CSV</a>
</form>
<div class="cards" aria-label="Totals">
<div class="card">Requests <b data-total="requests">${count(report.totals.requests)}</b></div>
<div class="card">Input tokens <b data-total="input_tokens">${count(report.totals.input_tokens)}</b></div>
<div class="card">Output tokens <b data-total="output_tokens">${count(report.totals.output_tokens)}</b></div>
<div class="card">Cost <b data-total="cost" data-value="${report.totals.cost}">${money(report.totals.cost, currency)}</b></div>
<div class="card">Of the input, cache reads <b data-total="cache_read_tokens">${count(report.totals.cache_read_tokens)}</b> <span data-total="cache_read_cost" data-value="${report.totals.cache_read_cost}">${money(report.totals.cache_read_cost, currency)}</span></div>
<div class="card">Of the input, cache writes <b data-total="cache_write_tokens">${count(report.totals.cache_write_tokens)}</b> <span data-total="cache_write_cost" data-value="${report.totals.cache_write_cost}">${money(report.totals.cache_write_cost, currency)}</span></div>
<div class="card">Of the requests, answered from the response cache <b data-total="cached_requests">${count(report.totals.cached_requests)}</b></div>
<div class="card">Of the requests, batch lines <b data-total="batch_requests">${count(report.totals.batch_requests)}</b> <span data-total="batch_cost" data-value="${report.totals.batch_cost}">${money(report.totals.batch_cost, currency)}</span></div>
</div>
${budgetsSection(budgets, currency, new Map(budgetedKeys.map((k) => [k.id, `${k.name ?? '(unnamed)'} (${k.prefix}…)`])))}
<h2>Tokens per day</h2>
${stackedBars('Tokens per day', labels, [
  { name: 'Input tokens', colour: '#0b5cad', values: report.days.map((d) => d.input_tokens) },
  { name: 'Output tokens', colour: '#f5a623', values: report.days.map((d) => d.output_tokens) },
])}
<h2>Cost per day (${currency})</h2>
${stackedBars(`Cost per day (${currency})`, labels, [{ name: `Cost (${currency})`, colour: '#1a7f37', values: report.days.map((d) => d.cost) }], { axis: amount, value: amount })}
<h2>Per model</h2>
${scrolling(
  html`<table><thead><tr><th scope="col">Model</th>${NUM_HEADS}</tr></thead><tbody>
${report.byModel.length === 0 ? html`<tr><td colspan="12">No usage in this range.</td></tr>` : report.byModel.map((r) => html`<tr><th scope="row">${String(r.model)}</th>${totalsRow(r)}</tr>`)}
</tbody></table>`,
  'Usage per model',
)}
${
  selected === null
    ? html`<h2>Per key</h2>
${scrolling(
  html`<table><thead><tr><th scope="col">Key</th>${NUM_HEADS}</tr></thead><tbody>
${report.byKey.length === 0 ? html`<tr><td colspan="12">No usage in this range.</td></tr>` : report.byKey.map((r) => html`<tr><th scope="row"><a href="/portal/usage?key=${String(r.key_id)}&amp;from=${report.from}&amp;to=${report.to}">${name(String(r.key_id))}</a></th>${totalsRow(r)}</tr>`)}
</tbody></table>`,
  'Usage per key',
)}`
    : ''
}
<h2>Per day</h2>
${scrolling(
  html`<table><thead><tr><th scope="col">Day</th>${NUM_HEADS}</tr></thead><tbody>
${active.length === 0 ? html`<tr><td colspan="12">No usage in this range.</td></tr>` : active.map((d) => html`<tr><th scope="row">${d.day}</th>${totalsRow({ ...d })}</tr>`)}
</tbody></table>`,
  'Usage per day',
)}
<h2>Per day and model</h2>
${scrolling(
  html`<table><thead><tr><th scope="col">Day</th><th scope="col">Model</th>${NUM_HEADS}</tr></thead><tbody>
${report.byDayAndModel.length === 0 ? html`<tr><td colspan="13">No usage in this range.</td></tr>` : report.byDayAndModel.map((r) => html`<tr><td>${String(r.day)}</td><td>${String(r.model)}</td>${totalsRow(r)}</tr>`)}
</tbody></table>`,
  'Usage per day and model',
)}`,
    viewer,
  )
}
