// "My keys": the signed-in user's keys, a page at a time, and the form that makes a new one.
import type { KeyView } from '../../keys/service.ts'
import { html, type Html } from '../html.ts'
import { csrfField, layout, notice, scrolling, type Viewer } from '../layout.ts'
import { count, pager, pageOf, scopes, statusCell, when } from './format.ts'

export interface KeyRow {
  readonly view: KeyView
  /** The last UTC day the key was metered, or null. */
  readonly lastUsed: string | null
}

export function keysTable(
  rows: readonly KeyRow[],
  options: { owner?: (view: KeyView) => string; actions?: (view: KeyView) => Html; empty?: string } = {},
): Html {
  if (rows.length === 0) return html`<p>${options.empty ?? 'No keys yet.'}</p>`
  return scrolling(
    html`<table>
<caption class="visually-hidden">API keys</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Prefix</th>${options.owner ? html`<th scope="col">Owner</th>` : ''}<th scope="col">Tier</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Last used</th><th scope="col">Expires</th><th scope="col">Scopes</th>${options.actions ? html`<th scope="col">Tier change</th>` : ''}</tr></thead>
<tbody>
${rows.map(
  ({ view, lastUsed }) => html`<tr>
<td><a href="/portal/keys/${view.id}">${view.name ?? '(unnamed)'}</a></td>
<td><code>${view.prefix}…</code></td>
${options.owner ? html`<td>${options.owner(view)}</td>` : ''}
<td>${view.tier ?? '—'}</td>
<td>${statusCell(view.status)}</td>
<td>${when(view.created_at)}</td>
<td>${lastUsed ?? 'never'}</td>
<td>${when(view.expires_at, 'never')}</td>
<td>${scopes(view)}</td>
${options.actions ? html`<td>${options.actions(view)}</td>` : ''}
</tr>`,
)}
</tbody>
</table>`,
    'API keys',
  )
}

export function keysPage(
  viewer: Viewer,
  rows: readonly KeyRow[],
  query: URLSearchParams,
  pageSize: number,
  message?: Html,
): Html {
  const { page, pages, start } = pageOf(query, rows.length, pageSize)
  return layout(
    'My keys',
    html`
${message ?? ''}
${
  rows.length === 0
    ? html`<p>No keys yet. Create one below: it is shown to you once, to copy into your client.</p>`
    : html`<p>${count(rows.length)} key${rows.length === 1 ? '' : 's'}. Select a key to see its limits, rotate it or revoke it.</p>
${keysTable(rows.slice(start, start + pageSize))}`
}
${pages > 1 ? pager('/portal/keys', query, page, pages, rows.length) : ''}
<h2 id="create">Create a key</h2>
<form class="inline" method="post" action="/portal/keys" aria-labelledby="create">
${csrfField(viewer)}
<label for="key-name">Name <input id="key-name" name="name" maxlength="200" required placeholder="e.g. laptop"></label>
<label for="key-expires">Expires (optional) <input id="key-expires" name="expires" type="date"></label>
<button type="submit">Create key</button>
</form>`,
    viewer,
  )
}

/** The one time a secret is shown: after create and after rotate. */
/** The secret shown once, and the base URL an SDK uses it with. */
export interface ShownSecret {
  readonly secret: string
  readonly baseUrl: string
}

export function secretPage(viewer: Viewer, title: string, view: KeyView, shown: ShownSecret, extra?: Html): Html {
  const { secret, baseUrl } = shown
  return layout(
    title,
    html`
${notice('warn', html`<strong>Copy this key now.</strong> It will not be shown again: Tollgate keeps only a hash of it.`)}
${extra ?? ''}
<div class="secret">
<label for="secret" class="visually-hidden">Your new API key</label>
<input id="secret" readonly value="${secret}" aria-describedby="copy-status" spellcheck="false">
<button type="button" data-copy="secret" data-copy-status="copy-status">Copy</button>
</div>
<p id="copy-status" class="hint" role="status" aria-live="polite"></p>
<p>Use it as the API key of the OpenAI SDK, with this base URL:</p>
<pre id="base-url"><code>${baseUrl}</code></pre>
<pre><code>new OpenAI({ baseURL: '${baseUrl}', apiKey: process.env.TOLLGATE_KEY })</code></pre>
<p><a href="/portal/keys/${view.id}">Key ${view.name ?? view.prefix}</a> · <a href="/portal/keys">All my keys</a></p>`,
    viewer,
  )
}

/**
 * The secret page opened again (a reload, the back button, a second tab): the secret was
 * shown once and is not kept, so it cannot be shown again; rotating gives a new one.
 */
export function secretGonePage(viewer: Viewer, view: KeyView): Html {
  return layout(
    'Key already shown',
    html`
${notice('warn', html`The secret of key <strong>${view.name ?? view.prefix}</strong> was shown once and is not kept: Tollgate holds only a hash of it.`)}
<p>If you did not copy it, <a href="/portal/keys/${view.id}#rotate">rotate the key</a> to get a new secret.</p>
<p><a href="/portal/keys/${view.id}">Key ${view.name ?? view.prefix}</a> · <a href="/portal/keys">All my keys</a></p>`,
    viewer,
  )
}
