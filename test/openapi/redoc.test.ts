// /redoc in a real browser: Debian's Chromium, headless, driven by playwright-core (which
// never downloads a browser of its own). The page must render the operations of the
// document with no console error, no page error, and no request leaving the gateway: the
// Redoc bundle is served from npm's copy by the gateway itself, under a CSP that allows
// only that. .ci/run installs the chromium package.
import type { BrowserContext } from 'playwright-core'
import t from 'tap'
import { launchChromium } from '../helpers/browser.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

let gw: RunningTollgate
let browser: BrowserContext

t.before(async () => {
  gw = await startTollgate()
  browser = await launchChromium(t)
})
t.teardown(async () => {
  await browser?.close()
  await gw?.stop()
})

t.test('/redoc renders every operation, with no console error and nothing fetched from elsewhere', async (t) => {
  const page = await browser.newPage()
  const errors: string[] = []
  const elsewhere: string[] = []
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') errors.push(`${message.type()}: ${message.text()}`)
  })
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`))
  page.on('request', (request) => {
    const url = request.url()
    // Redoc's search index runs in a web worker made from a blob: of this origin.
    if (!url.startsWith(`${gw.url}/`) && !url.startsWith(`blob:${gw.url}/`)) elsewhere.push(url)
  })

  const response = await page.goto(`${gw.url}/redoc`)
  t.equal(response?.status(), 200)
  t.match(response?.headers()['content-security-policy'], /default-src 'none'/)

  const document = (await (await fetch(`${gw.url}/openapi.json`)).json()) as {
    paths: Record<string, Record<string, { operationId: string; summary: string }>>
  }
  const operations = Object.values(document.paths).flatMap((item) => Object.values(item))
  // Redoc gives each operation a section of its own, keyed by its operationId.
  await page.waitForSelector('[data-section-id$="/operation/searchVectorStore"]', { timeout: 30_000 })
  const sections = await page
    .locator('[data-section-id*="/operation/"]')
    .evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-section-id') ?? ''))
  const rendered = new Set(sections.map((id) => id.slice(id.lastIndexOf('/') + 1)))
  t.same(
    operations.map((op) => op.operationId).filter((id) => !rendered.has(id)),
    [],
    'every operation of the document is rendered',
  )
  for (const summary of [
    'Search a vector store',
    'Attach a file to a vector store',
    'Create a chat completion',
    'Create an API key',
  ]) {
    t.ok(await page.locator('h2', { hasText: summary }).first().isVisible(), `"${summary}" is on the page`)
  }

  // The interactive parts work: the menu leads to an operation, and the search finds one.
  await page.locator('li[data-item-id="tag/Vector-stores"] > label').click()
  await page.locator('li[data-item-id="tag/Vector-stores/operation/searchVectorStore"] > label').click()
  await page.waitForURL(/#tag\/Vector-stores\/operation\/searchVectorStore$/)
  await page.fill('input[placeholder="Search..."]', 'batch')
  await page.waitForSelector('[data-role="search:results"] >> text=Cancel a file batch', { timeout: 10_000 })

  await page.waitForTimeout(300)
  t.same(errors, [], 'no console errors or warnings')
  t.same(elsewhere, [], 'nothing requested from another origin')
})

t.test("the bundle: from npm's redoc, cached by version, revalidated by ETag, without the CDN logo", async (t) => {
  const page = await (await fetch(`${gw.url}/redoc`)).text()
  const src = /<script src="([^"]+)"/.exec(page)?.[1] ?? ''
  t.match(src, /^\/redoc\/redoc\.standalone\.js\?v=[\w-]+$/)
  const bundle = await fetch(`${gw.url}${src}`)
  t.equal(bundle.status, 200)
  t.match(bundle.headers.get('content-type'), /^text\/javascript/)
  t.match(bundle.headers.get('cache-control'), /immutable/, 'the versioned URL is cached for good')
  const text = await bundle.text()
  t.ok(text.length > 500_000, 'the standalone bundle')
  t.notMatch(text, /cdn\.redoc\.ly/, "no request to Redocly's CDN is left in it")
  const plain = await fetch(`${gw.url}/redoc/redoc.standalone.js`)
  t.notMatch(plain.headers.get('cache-control'), /immutable/, 'an unversioned request is checked again later')
  await plain.arrayBuffer()
  const again = await fetch(`${gw.url}${src}`, { headers: { 'if-none-match': bundle.headers.get('etag') ?? '' } })
  t.equal(again.status, 304)
})
