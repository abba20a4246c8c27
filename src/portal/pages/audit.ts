// The admin's audit page: the log of changes, newest first, filtered by who, what and when,
// with each record's changes as "field: before → after".
import type { AuditEntry, AuditSnapshot } from '../../audit/record.ts'
import { html, type Html } from '../html.ts'
import { layout, scrolling, type Viewer } from '../layout.ts'
import { when } from './format.ts'

export interface AuditPageFilter {
  readonly actor: string
  readonly action: string
  readonly object_type: string
  readonly object_id: string
  readonly since: string
  readonly until: string
}

const shown = (value: unknown): string => (value === undefined ? '—' : JSON.stringify(value))

/** What a change did: the fields that differ, or the whole object when it came or went. */
function changes(before: AuditSnapshot | null, after: AuditSnapshot | null): Html {
  if (before === null && after === null) return html`—`
  const fields = [...new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})])]
  const rows = fields
    // A new object: what it was made with (fields left empty say nothing). Else what moved.
    .filter((f) => (before === null ? after?.[f] !== null : after === null || shown(before[f]) !== shown(after[f])))
    .map((f) => {
      if (before === null) return html`<li><code>${f}</code>: ${shown(after?.[f])}</li>`
      if (after === null) return html`<li><code>${f}</code>: ${shown(before[f])} → gone</li>`
      return html`<li><code>${f}</code>: ${shown(before[f])} → ${shown(after[f])}</li>`
    })
  const label = before === null ? 'created' : after === null ? 'removed' : rows.length === 0 ? 'no field changed' : ''
  return html`${label === '' ? '' : html`<span class="hint">${label}</span>`}${rows.length > 0 ? html`<ul class="changes">${rows}</ul>` : ''}`
}

function actorCell(entry: AuditEntry): Html {
  if (entry.actor.type === 'key')
    return html`<code>${entry.actor.id}</code> <span class="hint">(a call's guardrails)</span>`
  return entry.actor.type === 'user'
    ? html`${entry.actor.name} <span class="hint">(portal)</span>`
    : html`<code>${entry.actor.id}</code> <span class="hint">(${entry.via === 'cli' ? 'CLI' : 'admin API'})</span>`
}

export function auditPage(
  viewer: Viewer,
  entries: readonly AuditEntry[],
  filter: AuditPageFilter,
  choices: { readonly actions: readonly string[]; readonly objectTypes: readonly string[] },
  older: string | null,
): Html {
  const select = (id: string, name: string, label: string, options: readonly string[], value: string): Html =>
    html`<label for="${id}">${label} <select id="${id}" name="${name}"><option value="">Any</option>${options.map((o) => html`<option value="${o}"${o === value ? html` selected` : ''}>${o}</option>`)}</select></label>`
  const text = (id: string, name: string, label: string, value: string, type = 'text'): Html =>
    html`<label for="${id}">${label} <input id="${id}" name="${name}" type="${type}" value="${value}" maxlength="200"></label>`
  const olderLink = (): string => {
    const q = new URLSearchParams(Object.entries(filter).filter(([, v]) => v !== ''))
    q.set('after', older ?? '')
    return `/portal/admin/audit?${q.toString()}`
  }
  return layout(
    'Audit log',
    html`
<p class="hint">Every change made through the admin API, the CLI and this portal, newest first. Secrets are never recorded.</p>
<form class="inline" method="get" action="/portal/admin/audit" aria-label="Filter">
${text('filter-actor', 'actor', 'Who (username or admin:…)', filter.actor)}
${select('filter-action', 'action', 'Action', choices.actions, filter.action)}
${select('filter-type', 'object_type', 'Object', choices.objectTypes, filter.object_type)}
${text('filter-object', 'object_id', 'Object id', filter.object_id)}
${text('filter-since', 'since', 'From', filter.since, 'date')}
${text('filter-until', 'until', 'To', filter.until, 'date')}
<button type="submit">Filter</button>
</form>
${
  entries.length === 0
    ? html`<p>No change matches these filters.</p>`
    : scrolling(
        html`<table class="audit stack">
<caption class="visually-hidden">Audit log</caption>
<thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Object</th><th scope="col">Changes</th><th scope="col">From</th></tr></thead>
<tbody>
${entries.map(
  (e) => html`<tr data-audit-id="${e.id}">
<td data-label="When">${when(new Date(e.at).toISOString())}</td>
<td data-label="Who">${actorCell(e)}</td>
<td data-label="Action"><code>${e.action}</code></td>
<td data-label="Object">${e.objectType} <code>${e.objectId}</code></td>
<td data-label="Changes">${changes(e.before, e.after)}</td>
<td data-label="From">${e.address}</td>
</tr>`,
)}
</tbody>
</table>`,
        'Audit log',
      )
}
${older === null ? '' : html`<nav class="pager" aria-label="Pages"><a href="${olderLink()}" rel="next">Older changes</a></nav>`}`,
    viewer,
  )
}
