// A refusal or failure as a page, in the portal's frame.
import type { GatewayError } from '../../errors.ts'
import { html, type Html } from '../html.ts'
import { layout, notice, type Viewer } from '../layout.ts'

const TITLES: Readonly<Record<number, string>> = {
  400: 'That did not work',
  403: 'Refused',
  404: 'Not found',
  409: 'Try again',
  429: 'Too many attempts',
}

export function errorPage(error: GatewayError, viewer?: Viewer): Html {
  const title = TITLES[error.status] ?? (error.status >= 500 ? 'Something went wrong' : 'That did not work')
  const message = error.status === 404 ? 'There is nothing here, or it is not yours.' : error.message
  return layout(title, html`${notice('error', message)}<p><a href="/portal/keys">Back to your keys</a></p>`, viewer)
}
