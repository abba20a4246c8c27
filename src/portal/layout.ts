// The frame of every portal page: head (the one stylesheet and script), a skip link, the
// navigation of a signed-in user with the sign-out form, and the page's own content.
import { assetUrl } from './assets.ts'
import { html, type Html } from './html.ts'

export interface Viewer {
  readonly username: string
  readonly isAdmin: boolean
  readonly csrfToken: string
}

export const ADMIN_ROLE = 'admin'

export function csrfField(viewer: Viewer): Html {
  return html`<input type="hidden" name="_csrf" value="${viewer.csrfToken}">`
}

export function layout(title: string, content: Html, viewer?: Viewer): Html {
  return html`<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${title} · Tollgate portal</title>
<link rel="stylesheet" href="${assetUrl('portal.css')}">
<script src="${assetUrl('portal.js')}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/portal">Tollgate</a>
${
  viewer === undefined
    ? ''
    : html`<nav aria-label="Portal">
<a href="/portal/keys">My keys</a>
<a href="/portal/usage">Usage</a>
${viewer.isAdmin ? html`<a href="/portal/admin/keys">All keys</a><a href="/portal/admin/users">Users</a><a href="/portal/admin/audit">Audit log</a>` : ''}
</nav>
<div class="who">
<span class="hint">Signed in as <b>${viewer.username}</b></span>
<form method="post" action="/portal/sign-out">${csrfField(viewer)}<button type="submit" class="secondary">Sign out</button></form>
</div>`
}
</header>
<main id="main">
<h1>${title}</h1>
${content}
</main>
</body>
</html>`
}

/**
 * A wide table in a box of its own that scrolls sideways on a narrow screen, so the page
 * itself never does (a phone is 390 px; the limits table is twice that). Focusable, so a
 * keyboard can scroll it too; named, so a screen reader says what the region is.
 */
export function scrolling(table: Html, label: string): Html {
  return html`<div class="table-scroll" tabindex="0" role="region" aria-label="${label}">${table}</div>`
}

export function notice(kind: 'warn' | 'error' | 'ok', content: Html | string): Html {
  return html`<div class="notice ${kind}" role="${kind === 'error' ? 'alert' : 'status'}">${content}</div>`
}
