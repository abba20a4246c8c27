// One key: what it is, the forms to rotate it (with a grace for the old secret) and to
// revoke it, right below its summary; then its plan per model and, while it can be used,
// what is left in the current window.
import type { KeyView } from '../../keys/service.ts'
import { MAX_GRACE_SECONDS } from '../../keys/service.ts'
import { html, type Html } from '../html.ts'
import { csrfField, layout, scrolling, type Viewer } from '../layout.ts'
import { DIMENSIONS, type ModelStanding } from '../limits-view.ts'
import type { BudgetStatus } from '../../limits/port.ts'
import { budgetsSection } from './budgets.ts'
import { amount, scopes, statusCell, when } from './format.ts'

const GRACE_PRESETS: ReadonlyArray<[number, string]> = [
  [0, 'None: the old key stops now'],
  [300, '5 minutes'],
  [3600, '1 hour'],
  [86_400, '1 day'],
  [604_800, '7 days'],
]

/** live: the key can be used, and each cell says what is left of its window; else the limits alone. */
function limitsTable(standing: readonly ModelStanding[], live: boolean, currency: string): Html {
  const heads = DIMENSIONS.map((d) => `${d.label}${live ? ': left / limit' : ': limit'}`)
  const price = `Price in / out per 1M tokens (${currency})`
  return scrolling(
    html`<table class="stack">
<caption class="visually-hidden">Limits per model</caption>
<thead><tr><th scope="col">Model</th>${heads.map((head) => html`<th scope="col" class="num">${head}</th>`)}<th scope="col" class="num">Quota (tokens)</th><th scope="col" class="num">${price}</th></tr></thead>
<tbody>
${standing.map(
  (s) => html`<tr>
<th scope="row">${s.model}</th>
${DIMENSIONS.map((d, i) => {
  const w = s.windows[d.suffix]
  const label = heads[i] ?? d.label
  if (w === undefined) return html`<td class="num" data-label="${label}">—</td>`
  if (!live) return html`<td class="num" data-label="${label}">${w.limit}</td>`
  return html`<td class="num" data-label="${label}">${w.remaining ?? '?'} / ${w.limit}${w.reset === null || w.remaining === w.limit ? '' : html`<br><span class="hint">resets in ${w.reset}</span>`}</td>`
})}
<td class="num" data-label="Quota (tokens)">${s.limits.quota ?? '—'}</td>
<td class="num" data-label="${price}">${amount(s.limits.input_price ?? 0)} / ${amount(s.limits.output_price ?? 0)}</td>
</tr>`,
)}
</tbody>
</table>`,
    'Limits per model',
  )
}

const SOURCES = { key: "this key's calls", tier: "the tier's calls", model: "every key's calls" } as const

/** What a call without max_tokens reserves on the token limits now, per model (docs/limits.md "Learned output reservations"). */
function reservationsTable(standing: readonly ModelStanding[]): Html {
  const rows = standing.filter((s) => s.reservation !== undefined)
  if (rows.length === 0) return html``
  return html`<h3 id="reservations">Output reserved by a call without max_tokens</h3>
<p class="hint">Against the token limits only: a call that sets no max_tokens holds this many output tokens per reply while it runs, learned from what calls like it produced, and is charged what it really produced when it ends. Set max_tokens and it holds that instead.</p>
${scrolling(
  html`<table class="stack">
<caption class="visually-hidden">Output reserved per model</caption>
<thead><tr><th scope="col">Model</th><th scope="col" class="num">Reserved per reply</th><th scope="col">Learned from</th></tr></thead>
<tbody>
${rows.map((s) => {
  const r = s.reservation
  if (r === undefined) return html``
  const learned = r.reserved_per_reply !== null && r.source !== null
  return html`<tr><th scope="row">${s.model}</th><td class="num" data-label="Reserved per reply">${learned ? String(r.reserved_per_reply) : 'the fixed cap'}</td><td data-label="Learned from">${learned && r.source !== null ? `${SOURCES[r.source]} (p${Math.round(r.quantile * 1000) / 10})` : r.mode === 'fixed' ? 'not learned on this tier' : 'not enough calls yet'}</td></tr>`
})}
</tbody>
</table>`,
  'Output reserved per model',
)}`
}

function actions(viewer: Viewer, view: KeyView): Html {
  return html`<section class="actions" aria-label="Change this key">
<div>
<h2 id="rotate">Rotate</h2>
<form class="inline" method="post" action="/portal/keys/${view.id}/rotate" aria-labelledby="rotate">
${csrfField(viewer)}
<label for="grace">Grace period for the old secret
<select id="grace" name="grace_preset">${GRACE_PRESETS.map(([s, label]) => html`<option value="${s}">${label}</option>`)}<option value="custom">Other (seconds below)</option></select></label>
<label for="grace-seconds">Other grace, in seconds <input id="grace-seconds" name="grace_seconds" type="number" min="0" max="${MAX_GRACE_SECONDS}" inputmode="numeric"></label>
<button type="submit">Rotate key</button>
</form>
</div>
<div>
<h2 id="revoke">Revoke</h2>
<form class="inline" method="post" action="/portal/keys/${view.id}/revoke" data-confirm="Revoke this key? Every client using it is refused from now on. This cannot be undone." aria-labelledby="revoke">
${csrfField(viewer)}
<label class="check" for="confirm-revoke"><input id="confirm-revoke" type="checkbox" name="confirm" value="yes" required> Yes, revoke this key for good</label>
<button type="submit" class="danger">Revoke key</button>
</form>
</div>
</section>`
}

export function keyPage(
  viewer: Viewer,
  view: KeyView,
  standing: readonly ModelStanding[],
  lastUsed: string | null,
  currency: string,
  budgets: readonly BudgetStatus[] = [],
): Html {
  const live = view.status === 'active'
  return layout(
    `Key ${view.name ?? view.prefix}`,
    html`
<dl>
<dt>Prefix</dt><dd><code>${view.prefix}…</code></dd>
<dt>Tier</dt><dd>${view.tier ?? '—'}</dd>
<dt>Status</dt><dd>${statusCell(view.status)}</dd>
<dt>Created</dt><dd>${when(view.created_at)}</dd>
<dt>Last used</dt><dd>${lastUsed ?? 'never'}</dd>
<dt>Expires</dt><dd>${when(view.expires_at, 'never')}</dd>
<dt>Scopes</dt><dd>${scopes(view)}</dd>
${view.rotation_grace_until === null ? '' : html`<dt>Previous secret works until</dt><dd>${when(view.rotation_grace_until)}</dd>`}
</dl>
<p><a href="/portal/usage?key=${view.id}">Usage of this key</a></p>
${live ? actions(viewer, view) : ''}
<h2 id="limits">Limits</h2>
${
  live
    ? html`<p class="hint">The plan of tier ${view.tier ?? '—'} per model, and what is left in the current window: the same counters as the <code>x-ratelimit-*</code> headers.</p>`
    : html`<p class="hint">This key is ${view.status}: no call gets through with it, so there is no window to count. Its plan of tier ${view.tier ?? '—'} per model was:</p>`
}
${limitsTable(standing, live, currency)}
${live ? reservationsTable(standing) : ''}
${live ? budgetsSection(budgets, currency) : ''}`,
    viewer,
  )
}
