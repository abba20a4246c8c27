// The portal as a person uses it, in Debian's Chromium (headless, driven by playwright-core,
// which never downloads a browser of its own): sign in with the keyboard, create a key,
// copy it, call the gateway with it through the official openai SDK, find that call's
// tokens and cost in the usage view and its CSV, see the limits the headers report, rotate
// with a short grace and see the old secret refused once it is over, revoke, sign out; an
// admin changes a key's tier and makes and disables a user; another user's key is a 404.
// Reloading a page a form led to re-sends nothing; the pages fit a phone.
// Every page is photographed into .tap/screenshots/ (ignored by git: a test run changes no
// tracked file); `npm run screenshots` (TOLLGATE_SCREENSHOTS=docs) writes the README's
// docs/portal-*.png instead, on purpose. No page may log a console error (a CSP violation
// is one) or ask anything of another origin.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import OpenAI from 'openai'
import type { BrowserContext, Page } from 'playwright-core'
import t from 'tap'
import { launchChromium } from '../helpers/browser.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { formatAmount, formatMoney } from '../../src/keys/money.ts'
import { createUser } from './helpers.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const DOCS = join(ROOT, 'docs')
/** The README's screenshots only when asked for (npm run screenshots); else test output git ignores. */
const SHOTS = process.env.TOLLGATE_SCREENSHOTS === 'docs' ? DOCS : join(ROOT, '.tap', 'screenshots')
const MODEL = 'gpt-oss-120b'
/** Basic tier's price of MODEL, per million tokens, in and out (config/plans.yaml). */
const PRICE = 3.53

let gw: RunningTollgate
let browser: BrowserContext
const problems: string[] = []
/** While set, a 404 is what the test asked for (another user's key by its URL). */
let expecting404 = false

/** `git status` of docs/ before the run (null outside a git checkout): the run must leave it as it found it. */
let docsBefore: string | null = null
const docsStatus = (): string | null => {
  try {
    return execFileSync('git', ['status', '--porcelain', '--', 'docs'], { cwd: ROOT, encoding: 'utf8' })
  } catch {
    return null
  }
}

t.before(async () => {
  docsBefore = docsStatus()
  // A long rate-limit window: the limits page and the call's headers read the same window.
  gw = await startTollgate({
    config: (doc) => {
      doc.limits = { ...(doc.limits as object), windowMs: 3_600_000 }
    },
  })
  await createUser(gw, 'alice', 'alice-password')
  await createUser(gw, 'bob', 'bob-password')
  await createUser(gw, 'root', 'root-password', ['admin'])
  browser = await launchChromium(t, { viewport: { width: 1200, height: 860 }, acceptDownloads: true })
  await browser.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: gw.url })
  mkdirSync(SHOTS, { recursive: true })
})
t.teardown(async () => {
  await browser?.close()
  await gw?.stop()
})

function watch(page: Page): Page {
  page.on('console', (m) => {
    if (expecting404 && /status of 404/.test(m.text())) return
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('request', (r) => {
    if (!r.url().startsWith(`${gw.url}/`)) problems.push(`request elsewhere: ${r.url()}`)
  })
  return page
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `portal-${name}.png`), fullPage: true })
}

/** Every visible form control has a label a screen reader reads. */
async function unlabelled(page: Page): Promise<string[]> {
  return page
    .locator('input:not([type=hidden]), select, textarea')
    .evaluateAll((nodes) =>
      nodes
        .filter(
          (n) =>
            (n as unknown as { labels: { length: number } | null }).labels?.length === 0 &&
            !n.getAttribute('aria-label'),
        )
        .map((n) => n.outerHTML),
    )
}

async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.goto(`${gw.url}/portal`)
  await page.waitForURL(/\/portal\/sign-in$/)
  await page.getByLabel('Username').fill(username)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/\/portal\/keys$/)
}

async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click()
  await page.waitForURL(/\/portal\/sign-in\?signed-out$/)
  await page.getByText('You are signed out.').waitFor()
}

/** What the admin API says of a user's keys: their ids and prefixes. */
async function keysOwnedBy(username: string): Promise<Array<{ id: string; prefix: string; status: string }>> {
  const user = (await (
    await fetch(`${gw.url}/admin/users/${username}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { id: string }
  const list = (await (
    await fetch(`${gw.url}/admin/keys?owner=${user.id}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { data: Array<{ id: string; prefix: string; status: string }> }
  return list.data
}

const secretStatus = async (secret: string): Promise<number> =>
  (await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${secret}` } })).status

t.test(
  'a person signs in, makes a key, uses it, watches its usage and limits, rotates, revokes and signs out',
  async (t) => {
    const page = watch(await browser.newPage())

    // Sign in with the keyboard alone: the username field has the focus, Tab goes on in order.
    await page.goto(`${gw.url}/portal`)
    await page.waitForURL(/\/portal\/sign-in$/)
    t.same(await unlabelled(page), [], 'sign-in: every field labelled')
    await shot(page, 'sign-in')
    t.equal(await page.evaluate('document.activeElement?.id'), 'username', 'the username has the focus')
    await page.keyboard.type('alice')
    await page.keyboard.press('Tab')
    t.equal(await page.evaluate('document.activeElement?.id'), 'password', 'Tab: the password')
    await page.keyboard.type('alice-password')
    await page.keyboard.press('Tab')
    t.equal(await page.evaluate('document.activeElement?.textContent'), 'Sign in', 'Tab: the button')
    await page.keyboard.press('Enter')
    await page.waitForURL(/\/portal\/keys$/)
    t.match(await page.locator('header').textContent(), /Signed in as alice/)
    const cookies = await browser.cookies(`${gw.url}/portal/keys`)
    const session = cookies.find((c) => c.name === 'tollgate_portal')
    t.ok(session?.httpOnly, 'the session cookie is HttpOnly')
    t.equal(session?.sameSite, 'Strict')
    t.equal(await page.evaluate('document.cookie'), '', 'script cannot read it')

    // A new user has no keys: the page says so once.
    const empty = await page.locator('main').innerText()
    t.equal(empty.match(/No keys yet/g)?.length, 1, 'one "no keys" message')
    t.notMatch(empty, /\b0 keys\b/, 'and no "0 keys" beside it')

    // Create a key: the form's POST leads (303) to the key's secret page, which shows the
    // secret once, with a warning, and the copy button copies it.
    await page.getByLabel('Name').fill('laptop')
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.waitForURL(/\/portal\/keys\/key_[0-9a-f]{24}\/secret$/)
    await page.getByText('It will not be shown again').waitFor()
    const shown = await page.locator('#secret').inputValue()
    t.match(shown, /^tg1_[\w]{40,}$/, 'the secret is on the page')
    await page.getByRole('button', { name: 'Copy' }).click()
    await page.getByText('Copied to the clipboard.').waitFor()
    const secret = await page.evaluate<string>('navigator.clipboard.readText()')
    t.equal(secret, shown, 'the clipboard holds the secret')
    t.equal(await page.locator('#base-url').innerText(), `${gw.url}/v2`, 'the base URL to use it with')
    t.same(await unlabelled(page), [], 'new key: every field labelled')
    await shot(page, 'new-key')
    const keyId =
      /\/portal\/keys\/(key_[0-9a-f]{24})/.exec(
        (await page.getByRole('link', { name: /^Key laptop/ }).getAttribute('href')) ?? '',
      )?.[1] ?? ''
    t.match(keyId, /^key_/)
    t.notMatch(page.url(), shown, 'the secret is not in the URL')

    // Reloading the page re-sends no form: no second key, and the secret is not shown again.
    await page.reload()
    await page.getByText('was shown once and is not kept').waitFor()
    t.notMatch(await page.content(), shown, 'reloaded: the secret is gone from the page')
    t.same(
      (await keysOwnedBy('alice')).map((k) => k.id),
      [keyId],
      'reloaded: still one key',
    )
    await page.goBack()
    t.notMatch(await page.content(), shown, 'back: not there either')
    await page.goto(`${gw.url}/portal/keys`)
    t.notMatch(await page.content(), secret, 'the list never shows the secret again')
    t.match(await page.locator('table').textContent(), /laptop/)
    await shot(page, 'keys')

    // Use it, as a client would: the openai SDK against this gateway.
    const client = new OpenAI({ apiKey: secret, baseURL: `${gw.url}/v2`, maxRetries: 0 })
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello to the portal.' }],
      max_tokens: 40,
    })
    const usage = completion.usage
    t.ok(usage !== undefined && usage.prompt_tokens > 0 && usage.completion_tokens > 0, 'the call reports its tokens')
    const input = usage?.prompt_tokens ?? 0
    const output = usage?.completion_tokens ?? 0
    const cost = ((input + output) * PRICE) / 1e6

    // That call's tokens and cost in the usage view, as totals and in the table by model.
    await page.goto(`${gw.url}/portal/usage`)
    const total = (name: string) => page.locator(`[data-total="${name}"]`).textContent()
    t.equal(await total('requests'), '1')
    t.equal(Number((await total('input_tokens'))?.replace(/,/g, '')), input, 'input tokens')
    t.equal(Number((await total('output_tokens'))?.replace(/,/g, '')), output, 'output tokens')
    const shownCost = Number(await page.locator('[data-total="cost"]').getAttribute('data-value'))
    t.ok(shownCost > 0 && Math.abs(shownCost - cost) < 1e-9, `cost ${shownCost} ≈ ${cost}`)
    t.equal(await total('cost'), formatMoney(shownCost, 'EUR'), 'written with its currency, by the one money formatter')
    t.notMatch(await total('cost'), /^0\.00 /, 'a non-zero cost is not 0.00')
    t.equal(
      await page.getByRole('region', { name: 'Usage per model' }).locator('thead th').nth(4).textContent(),
      'Cost (EUR)',
      'cost columns name the currency',
    )
    t.same(
      (await page.getByRole('region', { name: 'Usage per model' }).locator('thead th').allTextContents()).slice(-4),
      ['Cache write cost (EUR)', 'Cached replies', 'Batch lines', 'Batch cost (EUR)'],
      "so do the prompt cache's and the batches', after the response cache's replies",
    )
    t.match(await page.locator('main').innerText(), /Cost per day \(EUR\)/)
    const modelRow = page.locator('tr', { has: page.locator(`th:text-is("${MODEL}")`) }).first()
    t.match(await modelRow.textContent(), new RegExp(`${input}[\\s\\S]*${output}`), 'the per-model row')
    t.equal(await page.locator('svg.chart').count(), 2, 'two charts')
    t.ok((await page.locator('svg.chart rect').count()) > 2, 'with bars')
    t.same(await unlabelled(page), [], 'usage: every field labelled')
    await shot(page, 'usage')
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Download CSV' }).click(),
    ])
    const csv = readFileSync(await download.path(), 'utf8')
    t.equal(
      csv.split('\r\n')[0],
      'day,key_id,key_name,model,requests,input_tokens,output_tokens,cost,currency,cache_read_tokens,cache_write_tokens,cache_read_cost,cache_write_cost,cached_requests,batch_requests,batch_cost',
    )
    const csvCost =
      new RegExp(`,${keyId},laptop,${MODEL},1,${input},${output},([0-9.]+),EUR,0,0,0.00,0.00,0,0,0.00\r\n`).exec(
        csv,
      )?.[1] ?? ''
    t.ok(
      Math.abs(Number(csvCost) - shownCost) < 1e-12 && csvCost !== '0.00' && !/e/i.test(csvCost),
      `the CSV has the call, its exact cost (${csvCost}) and currency`,
    )
    t.equal(formatAmount(Number(csvCost)), formatAmount(shownCost))

    // Limits: the key's page shows what the x-ratelimit-* headers of a call say.
    const call = await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'again' }], max_tokens: 5 }),
    })
    await call.text()
    const remaining = call.headers.get('x-ratelimit-remaining-requests')
    const limit = call.headers.get('x-ratelimit-limit-requests')
    t.ok(remaining !== null && Number(remaining) < Number(limit), `the call used the window (${remaining}/${limit})`)
    await page.goto(`${gw.url}/portal/keys/${keyId}`)
    const row = page.locator('tr', { has: page.locator(`th:text-is("${MODEL}")`) })
    t.match(
      await row.locator('td').first().textContent(),
      new RegExp(`^${remaining} / ${limit}`),
      'requests left: the same counter as the header',
    )
    t.match(
      await page.getByRole('table', { name: 'Limits per model' }).locator('thead').textContent(),
      /Price in \/ out per 1M tokens \(EUR\)/,
      'prices name the currency',
    )
    // The actions come first, right under the key's summary; the long limits table after them.
    const top = async (selector: string): Promise<number> =>
      (await page.locator(selector).first().boundingBox())?.y ?? Number.NaN
    t.ok((await top('dl')) < (await top('button:text-is("Rotate key")')), 'rotate: below the summary')
    t.ok((await top('button:text-is("Revoke key")')) < (await top('#limits')), 'revoke: above the limits')
    t.ok((await top('button:text-is("Rotate key")')) < (await top('#limits')), 'rotate: above the limits')
    await shot(page, 'key')

    // Rotate with a 3-second grace: the page says until when the old secret works.
    await page.getByLabel('Grace period for the old secret').selectOption('custom')
    await page.getByLabel('Other grace, in seconds').fill('3')
    await page.getByRole('button', { name: 'Rotate key' }).click()
    await page.waitForURL(new RegExp(`/portal/keys/${keyId}/secret$`))
    await page.getByText('The old secret keeps working until').waitFor()
    const until = Date.parse((await page.locator('.notice.ok time').getAttribute('datetime')) ?? '')
    t.ok(until > Date.now() - 5000 && until < Date.now() + 10_000, 'the end of the grace is shown')
    const rotated = await page.locator('#secret').inputValue()
    t.not(rotated, secret)
    await shot(page, 'rotate')
    // Reloaded: not rotated again (the key's prefix is still the new secret's), not shown again.
    await page.reload()
    await page.getByText('was shown once and is not kept').waitFor()
    t.notMatch(await page.content(), rotated, 'reloaded: the rotated secret is gone from the page')
    const prefix = (await keysOwnedBy('alice')).find((k) => k.id === keyId)?.prefix ?? '-'
    t.ok(rotated.startsWith(prefix), 'reloaded: the key was not rotated a second time')
    t.equal(await secretStatus(rotated), 200, 'the new secret works')
    let refusedAt = 0
    for (let i = 0; i < 150 && refusedAt === 0; i++) {
      if ((await secretStatus(secret)) === 401) refusedAt = Date.now()
      else await new Promise((done) => setTimeout(done, 200))
    }
    t.ok(refusedAt !== 0, 'the old secret is refused once the grace is over')
    t.ok(refusedAt >= until - 1000, 'not before the time the page showed')
    t.equal(await secretStatus(rotated), 200, 'the new one still works')

    // Revoke, after the confirmation dialog.
    await page.goto(`${gw.url}/portal/keys/${keyId}`)
    await page.getByLabel('Yes, revoke this key for good').check()
    const dialog = page.waitForEvent('dialog').then(async (d) => {
      const text = d.message()
      await d.accept()
      return text
    })
    await page.getByRole('button', { name: 'Revoke key' }).click()
    t.match(await dialog, /cannot be undone/, 'a confirmation was asked')
    await page.waitForURL(new RegExp(`/portal/keys/${keyId}$`))
    t.match(await page.locator('dl').textContent(), /revoked/)
    t.equal(await secretStatus(rotated), 401, 'the revoked key is refused')
    // A revoked key has no current window: its limits, but nothing "left", no reset.
    const revokedPage = await page.locator('main').innerText()
    t.notMatch(revokedPage, /left \/ limit|resets in/, 'revoked: nothing about what is left')
    t.match(revokedPage, /This key is revoked/)
    t.match(await row.locator('td').first().textContent(), new RegExp(`^${limit}$`), 'the limit alone')
    t.equal(await page.getByRole('button', { name: 'Rotate key' }).count(), 0, 'no actions for a revoked key')
    // Reloaded after the revoke's redirect: a GET of the key page, nothing re-sent.
    await page.reload()
    t.match(await page.locator('dl').textContent(), /revoked/)

    // A second key for the admin part below.
    await page.goto(`${gw.url}/portal/keys`)
    await page.getByLabel('Name').fill('server')
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.getByText('It will not be shown again').waitFor()

    // A mistyped address while signed in: the 404 page keeps the navigation and sign-out.
    expecting404 = true
    t.equal((await page.goto(`${gw.url}/portal/keyz`))?.status(), 404)
    expecting404 = false
    t.match(await page.locator('main').innerText(), /There is nothing here/)
    t.equal(
      await page.getByRole('navigation', { name: 'Portal' }).getByRole('link', { name: 'My keys' }).count(),
      1,
      '404: the navigation is there',
    )
    t.match(await page.locator('header').textContent(), /Signed in as alice/)

    // Signing out says so.
    await signOut(page)
    await page.goto(`${gw.url}/portal/keys`)
    t.match(page.url(), /\/portal\/sign-in$/, 'signed out: the keys page sends to sign-in')
    t.equal(
      await page.getByText('You are signed out.').count(),
      0,
      'and the sign-in page reached that way does not claim a sign-out',
    )
    await page.close()
  },
)

t.test('another user sees none of it; an admin sees all, changes a tier, makes and disables a user', async (t) => {
  const page = watch(await browser.newPage())
  await signIn(page, 'bob', 'bob-password')
  t.equal(
    (await page.locator('main').innerText()).match(/No keys yet/g)?.length,
    1,
    "bob has no keys and sees none of alice's, said once",
  )
  const alicesKeys = (await (
    await fetch(`${gw.url}/admin/keys`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { data: Array<{ id: string; name: string; tier: string }> }
  const server = alicesKeys.data.find((k) => k.name === 'server')
  t.ok(server, "alice's second key")
  expecting404 = true
  const direct = await page.goto(`${gw.url}/portal/keys/${server?.id ?? ''}`)
  t.equal(direct?.status(), 404, "alice's key by its URL: not found")
  t.equal((await page.goto(`${gw.url}/portal/usage?key=${server?.id ?? ''}`))?.status(), 404, 'nor its usage')
  t.equal((await page.goto(`${gw.url}/portal/admin/keys`))?.status(), 404, 'no admin pages for bob')
  expecting404 = false
  await page.goto(`${gw.url}/portal/usage`)
  t.equal(await page.locator('[data-total="requests"]').textContent(), '0', "bob's usage is his own: none")
  await page.goto(`${gw.url}/portal/keys`)
  await signOut(page)

  await signIn(page, 'root', 'root-password')
  await page.getByRole('link', { name: 'All keys' }).click()
  await page.getByLabel('Owner (username)').fill('alice')
  await page.getByLabel('Status').selectOption('active')
  await page.getByRole('button', { name: 'Filter' }).click()
  await page.waitForURL(/owner=alice/)
  const rows = page.locator('tbody tr')
  t.equal(await rows.count(), 1, "alice's active key")
  t.match(await rows.first().textContent(), /server/)
  await shot(page, 'admin-keys')
  const tiers = await page.getByLabel('Tier of server').locator('option').allTextContents()
  const other = tiers.find((name) => name !== server?.tier) ?? ''
  await page.getByLabel('Tier of server').selectOption(other)
  await page.getByRole('button', { name: 'Set tier' }).click()
  await page.waitForURL(/\/portal\/admin\/keys$/)
  const after = (await (
    await fetch(`${gw.url}/admin/keys/${server?.id ?? ''}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { tier: string }
  t.equal(after.tier, other, 'the tier changed, through the same KeyService as the admin API')

  await page.getByRole('link', { name: 'Users' }).click()
  await page.getByLabel('Username').fill('frank')
  await page.getByLabel('Password').fill('frank-password')
  await page.getByRole('button', { name: 'Create user' }).click()
  await page.waitForURL(/\/portal\/admin\/users\?created=frank$/)
  t.match(await page.locator('tbody').textContent(), /frank/, 'frank was made')
  t.same(await unlabelled(page), [], 'users: every field labelled')
  page.once('dialog', (d) => void d.accept())
  await page.getByRole('button', { name: 'Disable frank' }).click()
  await page.getByRole('button', { name: 'Enable frank' }).waitFor()
  const frank = (await (
    await fetch(`${gw.url}/admin/users/frank`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { disabled: boolean }
  t.equal(frank.disabled, true, 'frank is disabled')
  await shot(page, 'admin-users')
  await signOut(page)
  await page.close()

  t.same(problems, [], 'no console error (no CSP violation), nothing requested from elsewhere')
})

t.test('an expired key, like a revoked one, shows its limits but no window', async (t) => {
  const alice = (await (
    await fetch(`${gw.url}/admin/users/alice`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  ).json()) as { id: string }
  const made = await fetch(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'short-lived',
      owner: alice.id,
      expires_at: new Date(Date.now() + 1500).toISOString(),
    }),
  })
  const key = (await made.json()) as { id: string }
  t.equal(made.status, 201)
  let status = 'active'
  for (let i = 0; i < 100 && status !== 'expired'; i++) {
    await new Promise((done) => setTimeout(done, 100))
    status = (
      (await (
        await fetch(`${gw.url}/admin/keys/${key.id}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
      ).json()) as { status: string }
    ).status
  }
  t.equal(status, 'expired', 'the key has expired')
  const page = watch(await browser.newPage())
  await signIn(page, 'alice', 'alice-password')
  await page.goto(`${gw.url}/portal/keys/${key.id}`)
  const text = await page.locator('main').innerText()
  t.match(text, /This key is expired/)
  t.notMatch(text, /left \/ limit|resets in/, 'nothing about what is left')
  t.match(await page.getByRole('table', { name: 'Limits per model' }).locator('thead').textContent(), /Requests: limit/)
  await signOut(page)
  await page.close()
})

/** Rows the header's parts take: a part starts a new row when it begins below the current row's bottom. */
async function headerRows(page: Page): Promise<number> {
  // A string, run in the page (this file is typed without the DOM's types).
  return page.evaluate<number>(`(() => {
    const boxes = [...document.querySelectorAll('header.top > *, header.top nav > *, header.top .who > *')]
      .map((el) => el.getBoundingClientRect()).filter((r) => r.height > 0).sort((a, b) => a.top - b.top)
    let rows = 0
    let bottom = -Infinity
    for (const box of boxes) {
      if (box.top >= bottom - 1) { rows++; bottom = box.bottom } else bottom = Math.max(bottom, box.bottom)
    }
    return rows
  })()`)
}

t.test(
  'on a phone (390 px) every page fits the screen: wide tables scroll in their own box, the header takes two lines at most',
  async (t) => {
    const page = watch(await browser.newPage())
    await page.setViewportSize({ width: 390, height: 844 })
    const fits = async (what: string): Promise<void> => {
      const width = await page.evaluate<number>(
        'Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)',
      )
      t.ok(width <= 390, `${what}: ${width} px wide`)
      const rows = await headerRows(page)
      t.ok(rows >= 1 && rows <= 2, `${what}: the header on ${rows} line(s)`)
    }
    await page.goto(`${gw.url}/portal/sign-in`)
    await fits('sign-in')
    // An admin: the most links in the header.
    await signIn(page, 'root', 'root-password')
    await fits('no keys')
    await page.getByLabel('Name').fill('phone')
    await page.getByRole('button', { name: 'Create key' }).click()
    await page.getByText('It will not be shown again').waitFor()
    await fits('the new key')
    const [first] = await keysOwnedBy('alice')
    for (const path of [
      '/portal/keys',
      `/portal/keys/${first?.id ?? ''}`,
      '/portal/usage',
      `/portal/usage?key=${first?.id ?? ''}`,
      '/portal/admin/keys',
      '/portal/admin/users',
    ]) {
      await page.goto(`${gw.url}${path}`)
      await fits(path)
    }
    // Tables too wide for the phone (the key's limits, the audit log) stack their rows as
    // cards: every cell on the screen, under its column's name, nothing to scroll sideways.
    const cellsOnScreen = async (what: string): Promise<void> => {
      const cells = await page.locator('table.stack td').evaluateAll((tds) =>
        tds.map((td) => {
          const box = td.getBoundingClientRect()
          return {
            right: box.right,
            width: box.width,
            label: (
              globalThis as unknown as { getComputedStyle: (el: unknown, pseudo: string) => { content: string } }
            ).getComputedStyle(td, '::before').content,
          }
        }),
      )
      t.ok(cells.length > 0, `${what}: cells`)
      t.ok(
        cells.every((c) => c.right <= 390 && c.width > 0),
        `${what}: every cell on the screen`,
      )
      t.ok(
        cells.every((c) => c.label.length > 2 && c.label !== 'none'),
        `${what}: each under its column's name`,
      )
    }
    await page.goto(`${gw.url}/portal/keys/${first?.id ?? ''}`)
    await cellsOnScreen('the key page')
    await page.screenshot({ path: join(ROOT, '.tap', 'screenshots', 'phone-key.png'), fullPage: true })
    await page.goto(`${gw.url}/portal/admin/audit`)
    await fits('/portal/admin/audit')
    await cellsOnScreen('the audit log')
    await page.screenshot({ path: join(ROOT, '.tap', 'screenshots', 'phone-audit.png'), fullPage: true })
    // The charts' labels stay legible: drawn at 13 units, shown at no less than 10 px.
    await page.goto(`${gw.url}/portal/usage`)
    const scales = await page
      .locator('svg.chart')
      .evaluateAll((svgs) => svgs.map((svg) => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width))
    t.ok(
      scales.length > 0 && scales.every((scale) => 13 * scale >= 10),
      `chart labels at ${scales.map((s) => (13 * s).toFixed(1)).join(', ')} px`,
    )
    await page.screenshot({ path: join(ROOT, '.tap', 'screenshots', 'phone-usage.png'), fullPage: true })
    expecting404 = true
    await page.goto(`${gw.url}/portal/nope`)
    expecting404 = false
    await fits('404')
    await signOut(page)
    await fits('signed out')
    await page.close()
    t.same(problems, [], 'no console error, nothing requested from elsewhere')
  },
)

t.test('a test run changes no tracked file: screenshots go where git ignores them', async (t) => {
  if (SHOTS === DOCS) {
    t.pass('npm run screenshots: docs/portal-*.png written on purpose')
    return
  }
  t.notOk(relative(ROOT, SHOTS).startsWith('docs'), 'not into docs/')
  const after = docsStatus()
  if (docsBefore === null || after === null) {
    t.ok(existsSync(join(SHOTS, 'portal-key.png')), 'not a git checkout: the screenshots are in the test output')
    return
  }
  t.equal(after, docsBefore, 'git status of docs/ is as before the run')
  t.equal(
    execFileSync('git', ['check-ignore', join(SHOTS, 'portal-key.png')], { cwd: ROOT, encoding: 'utf8' }).trim() !== '',
    true,
    'the screenshots are ignored by git',
  )
})
