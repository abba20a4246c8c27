// The interactive reference at /redoc: Redoc's standalone bundle, from the `redoc` npm
// package, served by the gateway itself (no CDN: machines behind a firewall see it too).
// The page loads nothing from elsewhere, and its Content-Security-Policy says so.
import { createHash } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'

export const REDOC_PAGE_PATH = '/redoc'
export const REDOC_BUNDLE_PATH = '/redoc/redoc.standalone.js'

/**
 * What the page may load: its script and the document from here, images as data: URIs;
 * Redoc builds its search index in a blob: web worker and styles with inline <style>.
 */
export const REDOC_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

/**
 * Redoc's side menu shows a logo it fetches from Redocly's CDN. A gateway behind a
 * firewall must not reach out (and the CSP would refuse it, with a console error), so the
 * bundle served here points the logo at an empty image instead.
 */
const CDN_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg'
const EMPTY_IMAGE = 'data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27 width=%271%27 height=%271%27/%3E'

export interface RedocBundle {
  readonly bytes: Buffer
  /** A strong validator of the bytes: the ETag, and the version in the page's script URL. */
  readonly etag: string
}

let loading: Promise<RedocBundle> | undefined

/** The bundle, read from node_modules on first use and kept. */
export function redocBundle(): Promise<RedocBundle> {
  loading ??= (async () => {
    const path = createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js')
    const source = (await readFile(path, 'utf8')).replaceAll(CDN_LOGO, EMPTY_IMAGE)
    const bytes = Buffer.from(source, 'utf8')
    return { bytes, etag: `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"` }
  })()
  // A failed read is tried again on the next request, not remembered.
  loading.catch(() => {
    loading = undefined
  })
  return loading
}

export function redocPage(version: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Tollgate API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<redoc spec-url="/openapi.json" expand-responses="200,201" required-props-first="true"></redoc>
<script src="${REDOC_BUNDLE_PATH}?v=${encodeURIComponent(version)}"></script>
</body>
</html>
`
}
