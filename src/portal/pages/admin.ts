// The admin's pages: every key (filtered by owner, tier and status) with a tier change per
// key, and every user, with the forms to create one and to disable or enable one.
import type { UserView } from '../../accounts/service.ts'
import { KEY_STATUSES, type KeyView } from '../../keys/service.ts'
import { html, type Html } from '../html.ts'
import { csrfField, layout, scrolling, type Viewer } from '../layout.ts'
import { pager, pageOf, when } from './format.ts'
import { keysTable, type KeyRow } from './keys.ts'

export interface AdminKeyFilter {
  readonly owner: string
  readonly tier: string
  readonly status: string
}

export function adminKeysPage(
  viewer: Viewer,
  rows: readonly KeyRow[],
  filter: AdminKeyFilter,
  tiers: readonly string[],
  usernames: ReadonlyMap<string, string>,
  query: URLSearchParams,
  pageSize: number,
  message?: Html,
): Html {
  const { page, pages, start } = pageOf(query, rows.length, pageSize)
  const select = (id: string, name: string, label: string, options: readonly string[], value: string): Html =>
    html`<label for="${id}">${label} <select id="${id}" name="${name}"><option value="">Any</option>${options.map((o) => html`<option value="${o}"${o === value ? html` selected` : ''}>${o}</option>`)}</select></label>`
  const tierForm = (view: KeyView): Html =>
    view.status === 'revoked'
      ? html`—`
      : html`<form class="inline" method="post" action="/portal/admin/keys/${view.id}/tier">
${csrfField(viewer)}
<label for="tier-${view.id}" class="visually-hidden">Tier of ${view.name ?? view.prefix}</label>
<select id="tier-${view.id}" name="tier">${tiers.map((t) => html`<option value="${t}"${t === view.tier ? html` selected` : ''}>${t}</option>`)}</select>
<button type="submit" class="secondary">Set tier</button>
</form>`
  return layout(
    'All keys',
    html`
${message ?? ''}
<form class="inline" method="get" action="/portal/admin/keys" aria-label="Filter">
<label for="filter-owner">Owner (username) <input id="filter-owner" name="owner" value="${filter.owner}" maxlength="64"></label>
${select('filter-tier', 'tier', 'Tier', tiers, filter.tier)}
${select('filter-status', 'status', 'Status', KEY_STATUSES, filter.status)}
<button type="submit">Filter</button>
</form>
${keysTable(rows.slice(start, start + pageSize), { owner: (v) => (v.owner === null ? '—' : (usernames.get(v.owner) ?? v.owner)), actions: tierForm, empty: 'No key matches these filters.' })}
${pages > 1 ? pager('/portal/admin/keys', query, page, pages, rows.length) : ''}`,
    viewer,
  )
}

export function adminUsersPage(
  viewer: Viewer,
  users: readonly UserView[],
  query: URLSearchParams,
  pageSize: number,
  message?: Html,
): Html {
  const { page, pages, start } = pageOf(query, users.length, pageSize)
  return layout(
    'Users',
    html`
${message ?? ''}
${scrolling(
  html`<table>
<caption class="visually-hidden">Users</caption>
<thead><tr><th scope="col">Username</th><th scope="col">Roles</th><th scope="col">Status</th><th scope="col">Created</th><th scope="col">Keys</th><th scope="col">Change</th></tr></thead>
<tbody>
${users.slice(start, start + pageSize).map(
  (u) => html`<tr>
<th scope="row">${u.username}</th>
<td>${u.roles.join(', ') || '—'}</td>
<td>${u.disabled ? html`<span class="status-revoked">disabled</span>` : html`<span class="status-active">enabled</span>`}</td>
<td>${when(u.created_at)}</td>
<td><a href="/portal/admin/keys?owner=${encodeURIComponent(u.username)}">Keys</a></td>
<td>${
    u.username === viewer.username
      ? html`<span class="hint">you</span>`
      : html`<form method="post" action="/portal/admin/users/${u.username}/${u.disabled ? 'enable' : 'disable'}"${u.disabled ? '' : html` data-confirm="Disable ${u.username}? Their portal sessions end now."`}>
${csrfField(viewer)}<button type="submit" class="${u.disabled ? 'secondary' : 'danger'}">${u.disabled ? 'Enable' : 'Disable'} ${u.username}</button></form>`
  }</td>
</tr>`,
)}
</tbody>
</table>`,
  'Users',
)}
${pages > 1 ? pager('/portal/admin/users', query, page, pages, users.length) : ''}
<h2 id="create-user">Create a user</h2>
<form class="stack" method="post" action="/portal/admin/users" aria-labelledby="create-user">
${csrfField(viewer)}
<label for="new-username">Username <input id="new-username" name="username" required maxlength="64" autocomplete="off"></label>
<label for="new-password">Password <span class="hint">at least 8 characters</span><input id="new-password" name="password" type="password" required minlength="8" maxlength="1024" autocomplete="new-password"></label>
<label class="check" for="new-admin"><input id="new-admin" type="checkbox" name="admin" value="yes"> Administrator (sees every key and user)</label>
<button type="submit">Create user</button>
</form>`,
    viewer,
  )
}
