// The audit log in the portal, in Debian's Chromium: alice makes a key and revokes it, the
// admin makes a user and changes a key's tier through the portal and a key through the
// admin API; the admin's audit page then shows exactly those changes (who, what, which
// object, before → after, from where), its filters narrow them and its pages go back in
// time; no secret is ever on it; a non-admin has no such page. The page logs no console
// error (a CSP violation is one) and asks nothing of another origin.
import { mkdirSync } from 'node:fs'
import { join, resolve } from 'node:path'
import type { BrowserContext, Page } from 'playwright-core'
import t from 'tap'
import { launchChromium } from '../helpers/browser.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { createUser } from './helpers.ts'

/** Like browser.test.ts: into .tap/screenshots/ (git ignores it), or docs/ for `npm run screenshots`. */
const SHOTS =
  process.env.TOLLGATE_SCREENSHOTS === 'docs'
    ? resolve(import.meta.dirname, '../../docs')
    : resolve(import.meta.dirname, '../../.tap/screenshots')

let gw: RunningTollgate
let browser: BrowserContext
const problems: string[] = []

t.before(async () => {
  // Two rows a page: the pager is walked with a handful of changes.
  gw = await startTollgate({
    config: (doc) => {
      doc.portal = { ...(doc.portal as object), pageSize: 2 }
    },
  })
  await createUser(gw, 'alice', 'alice-password')
  await createUser(gw, 'root', 'root-password', ['admin'])
  browser = await launchChromium(t, { viewport: { width: 1200, height: 860 } })
  mkdirSync(SHOTS, { recursive: true })
})
t.teardown(async () => {
  await browser?.close()
  await gw?.stop()
})

function watch(page: Page): Page {
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('request', (r) => {
    if (!r.url().startsWith(`${gw.url}/`)) problems.push(`request elsewhere: ${r.url()}`)
  })
  return page
}

async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.goto(`${gw.url}/portal`)
  await page.waitForURL(/\/portal\/sign-in$/)
  await page.getByLabel('Username').fill(username)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/\/portal\/keys$/)
}

/** The audit table's rows as text, one string per row (action, object, who). */
async function rows(page: Page): Promise<Array<{ id: string; text: string }>> {
  return page.locator('tr[data-audit-id]').evaluateAll((trs) =>
    trs.map((tr) => ({
      id: tr.getAttribute('data-audit-id') ?? '',
      text: (tr as unknown as { innerText: string }).innerText,
    })),
  )
}

t.test('actions taken in the portal and the admin API show in the admin view of the audit log', async (t) => {
  // alice: make a key, then revoke it.
  const alice = watch(await browser.newPage())
  await signIn(alice, 'alice', 'alice-password')
  await alice.getByLabel('Name').fill('audited')
  await alice.getByRole('button', { name: 'Create key' }).click()
  await alice.waitForURL(/\/portal\/keys\/key_[0-9a-f]{24}\/secret$/)
  const secret = await alice.locator('#secret').inputValue()
  const keyId = /\/portal\/keys\/(key_[0-9a-f]{24})\//.exec(alice.url())?.[1] ?? ''
  t.match(keyId, /^key_/)
  await alice.goto(`${gw.url}/portal/keys/${keyId}`)
  await alice.getByLabel('Yes, revoke this key for good').check()
  alice.once('dialog', (d) => void d.accept())
  await alice.getByRole('button', { name: 'Revoke key' }).click()
  await alice.waitForURL(new RegExp(`/portal/keys/${keyId}$`))
  // A non-admin has no audit page: not found, like any admin page.
  const refused = await alice.goto(`${gw.url}/portal/admin/audit`)
  t.equal(refused?.status(), 404, 'alice: the audit page does not exist for her')
  problems.length = 0 // that 404 is the console error asked for
  // One browser, one cookie jar: alice signs out before root signs in.
  await alice.goto(`${gw.url}/portal/keys`)
  await alice.getByRole('button', { name: 'Sign out' }).click()
  await alice.waitForURL(/\/portal\/sign-in\?signed-out$/)

  // The admin API changes a key of its own.
  const made = await fetch(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'ops' }),
  })
  const opsKey = (await made.json()) as { id: string; key: string }

  // root: a user through the portal, then the audit page.
  const root = watch(await browser.newPage())
  await signIn(root, 'root', 'root-password')
  await root.getByRole('link', { name: 'Users' }).click()
  await root.getByLabel('Username').fill('newbie')
  await root.getByLabel('Password').fill('newbie-password')
  await root.getByRole('button', { name: 'Create user' }).click()
  await root.waitForURL(/\/portal\/admin\/users\?created=newbie$/)
  await root.getByText('User newbie created.').waitFor()

  await root.getByRole('link', { name: 'Audit log' }).click()
  await root.waitForURL(/\/portal\/admin\/audit$/)
  // Newest first, two a page: newbie's creation, then the admin API's key.
  const first = await rows(root)
  t.equal(first.length, 2)
  t.match(
    first[0]?.text,
    /user\.create[\s\S]*user\s+newbie[\s\S]*root \(portal\)|root \(portal\)[\s\S]*user\.create[\s\S]*newbie/,
  )
  t.match(first[1]?.text, /key\.create/)
  t.match(first[1]?.text, opsKey.id)
  t.match(first[1]?.text, /admin:[0-9a-f]{16} \(admin API\)/, 'the admin token by its fingerprint')
  t.match(first[1]?.text, /127\.0\.0\.1/, 'from where')
  await root.screenshot({ path: join(SHOTS, 'portal-audit.png'), fullPage: true })
  // Older: alice's revoke and create.
  await root.getByRole('link', { name: 'Older changes' }).click()
  const second = await rows(root)
  t.equal(second.length, 2)
  t.match(second[0]?.text, /alice \(portal\)/)
  t.match(second[0]?.text, /key\.revoke/)
  t.match(second[0]?.text, keyId)
  t.match(second[0]?.text, /status: "active" → "revoked"/, 'before → after')
  t.match(second[1]?.text, /key\.create/)
  t.match(second[1]?.text, /created/)
  t.match(second[1]?.text, /name: "audited"/)
  await root.getByRole('link', { name: 'Older changes' }).click()
  t.same(
    (await rows(root)).map((r) => r.text.match(/(user|key)\.\w+/)?.[0]),
    ['user.create', 'user.create'],
    'and the oldest: the two users the test began with',
  )
  t.equal(await root.getByRole('link', { name: 'Older changes' }).count(), 0, 'the last page has no "older" link')

  // Filters: alice's changes; then only revocations; then that key by id.
  await root.goto(`${gw.url}/portal/admin/audit`)
  await root.getByLabel('Who').fill('alice')
  await root.getByRole('button', { name: 'Filter' }).click()
  await root.waitForURL(/actor=alice/)
  t.same(
    (await rows(root)).map((r) => /key\.\w+/.exec(r.text)?.[0]),
    ['key.revoke', 'key.create'],
    'alice: her two changes',
  )
  await root.getByLabel('Action').selectOption('key.revoke')
  await root.getByRole('button', { name: 'Filter' }).click()
  await root.waitForURL(/action=key\.revoke/)
  const revokes = await rows(root)
  t.equal(revokes.length, 1, 'alice and key.revoke: one')
  await root.goto(`${gw.url}/portal/admin/audit?object_type=key&object_id=${keyId}`)
  t.equal((await rows(root)).length, 2, 'one key: its two changes')
  const today = new Date().toISOString().slice(0, 10)
  await root.goto(`${gw.url}/portal/admin/audit?until=2000-01-01`)
  t.equal((await rows(root)).length, 0, 'before 2000: nothing')
  await root.getByText('No change matches these filters.').waitFor()
  await root.goto(`${gw.url}/portal/admin/audit?since=${today}&until=${today}&actor=alice`)
  t.equal((await rows(root)).length, 2, 'today, inclusive of the whole day')

  // No secret on any of these pages.
  for (const s of [secret, opsKey.key, gw.adminToken, 'newbie-password']) {
    await root.goto(`${gw.url}/portal/admin/audit`)
    t.notMatch(await root.content(), s, 'no secret on the page')
  }
  t.same(problems, [], 'no console error, nothing from elsewhere')
})
