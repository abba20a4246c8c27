// The budgets a key's calls are charged against (its own or its tier's, its owner's, its
// tenant's) and what is left of each in its current period: the key page and the usage page.
import type { BudgetStatus } from '../../limits/port.ts'
import { html, type Html } from '../html.ts'
import { scrolling } from '../layout.ts'
import { amount, when } from './format.ts'

const SCOPE: Readonly<Record<BudgetStatus['scope'], string>> = {
  key: 'This key',
  owner: 'All keys of the owner',
  tenant: 'The tenant',
}

/** `keyNames`: on a page of several keys, the name each key's own budget row goes by. */
export function budgetsSection(
  statuses: readonly BudgetStatus[],
  currency: string,
  keyNames?: ReadonlyMap<string, string>,
): Html {
  const label = (s: BudgetStatus): string => {
    const name = s.scope === 'key' ? keyNames?.get(s.id) : undefined
    return name === undefined ? SCOPE[s.scope] : `Key ${name}`
  }
  if (statuses.length === 0)
    return html`<h2 id="budgets">Budgets</h2>
<p class="hint">No budget applies: calls are limited by the plan's rates alone.</p>`
  return html`<h2 id="budgets">Budgets</h2>
<p class="hint">A call is admitted only if its estimated cost fits every budget below; once one is spent, calls are refused (<code>insufficient_quota</code>) until it resets.</p>
${scrolling(
  html`<table class="stack" data-budgets>
<caption class="visually-hidden">Budgets</caption>
<thead><tr><th scope="col">Budget</th><th scope="col">Period</th><th scope="col" class="num">Left / amount (${currency})</th><th scope="col" class="num">Spent</th><th scope="col" class="num">Held by calls in flight</th><th scope="col">Resets</th></tr></thead>
<tbody>
${statuses.map(
  (s) => html`<tr data-budget="${s.scope}:${s.id}">
<th scope="row">${label(s)} <span class="hint">${s.scope === 'key' ? (s.origin === 'plan' ? "(the tier's default)" : '') : s.id}</span></th>
<td data-label="Period">${s.period === 'lifetime' ? 'lifetime' : html`per ${s.period} <span class="hint">(${s.time_zone})</span>`}</td>
<td class="num" data-label="Left / amount (${currency})" data-remaining="${s.remaining}">${amount(s.remaining)} / ${amount(s.amount)}</td>
<td class="num" data-label="Spent">${amount(s.spent)}</td>
<td class="num" data-label="Held by calls in flight">${amount(s.reserved)}</td>
<td data-label="Resets">${s.resets_at === null ? 'never' : when(s.resets_at)}</td>
</tr>`,
)}
</tbody>
</table>`,
  'Budgets',
)}`
}
