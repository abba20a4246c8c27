// The sign-in page: a username and a password, the same accounts as the RAG login.
import { html, type Html } from '../html.ts'
import { layout, notice } from '../layout.ts'

export function signInPage(options: { error?: string; username?: string; signedOut?: boolean } = {}): Html {
  return layout(
    'Sign in',
    html`
${options.signedOut === true ? notice('ok', 'You are signed out. Your session has ended on this gateway, not just in this browser.') : ''}
${options.error === undefined ? '' : notice('error', options.error)}
<form class="stack" method="post" action="/portal/sign-in">
<label for="username">Username <input id="username" name="username" autocomplete="username" required maxlength="64" value="${options.username ?? ''}" autofocus></label>
<label for="password">Password <input id="password" name="password" type="password" autocomplete="current-password" required maxlength="1024"></label>
<button type="submit">Sign in</button>
</form>
<p class="hint">Use the account your administrator made for you (the same one as the RAG gateway's login).</p>`,
  )
}
