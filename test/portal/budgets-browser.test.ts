// A key's budgets in the portal, in Debian's Chromium: an admin sets a budget on a user's
// key and one on the user (the owner) through the admin API; the user spends part of it with
// the openai SDK, signs in, and reads on the key page and on the usage page what is left of
// each, the period and when it resets. A key whose budget is spent says so the same way.
import OpenAI from 'openai'
import type { BrowserContext, Page } from 'playwright-core'
import t from 'tap'
import { launchChromium } from '../helpers/browser.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { createUser } from './helpers.ts'

const MODEL = 'gpt-oss-120b'
/** Only output tokens cost, 0.001 EUR each; the mock writes exactly max_tokens. */
const PRICED = { '*': { input_price: 0, output_price: 1000 } }

let gw: RunningTollgate
let browser: BrowserContext
const problems: string[] = []

t.before(async () => {
  gw = await startTollgate()
  browser = await launchChromium(t, { viewport: { width: 1200, height: 860 } })
})
t.teardown(async () => {
  await browser?.close()
  await gw?.stop()
})

async function admin(method: string, path: string, body?: unknown): Promise<number> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  await res.arrayBuffer()
  return res.status
}

async function signIn(page: Page, username: string, password: string): Promise<void> {
  await page.goto(`${gw.url}/portal/sign-in`)
  await page.getByLabel('Username').fill(username)
  await page.getByLabel('Password').fill(password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/\/portal\/keys$/)
}

/** The budgets table as the page shows it: one row per budget, cell texts. */
async function budgetRows(page: Page): Promise<string[][]> {
  return page
    .locator('table[data-budgets] tbody tr')
    .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('th, td')].map((c) => (c.textContent ?? '').trim())))
}

t.test('the key page and the usage page show each budget, what is left of it and when it resets', async (t) => {
  const alice = await createUser(gw, 'alice', 'alice-password')
  const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: alice.id, name: 'budgeted', limits: PRICED })
  t.equal(
    await admin('PUT', `/admin/budgets/key/${id}`, { amount: 0.5, period: 'month', time_zone: 'Europe/Berlin' }),
    200,
  )
  t.equal(await admin('PUT', `/admin/budgets/owner/${alice.id}`, { amount: 2, period: 'day' }), 200)
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  // 0.12 EUR: 120 output tokens.
  await client.chat.completions.create({ model: MODEL, max_tokens: 120, messages: [{ role: 'user', content: 'hi' }] })

  const page = await browser.newPage()
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  await signIn(page, 'alice', 'alice-password')
  await page.goto(`${gw.url}/portal/keys/${id}`)
  await page.getByRole('heading', { name: 'Budgets' }).waitFor()
  const rows = await budgetRows(page)
  t.equal(rows.length, 2, 'the key budget and the owner budget')
  t.match(rows[0], [
    'This key',
    /per month\s+\(Europe\/Berlin\)/,
    '0.38 / 0.50',
    '0.12',
    '0.00',
    /^\d{4}-\d\d-\d\d 2[23]:00:00 UTC$/,
  ])
  t.match(rows[1], [
    /All keys of the owner/,
    /per day\s+\(UTC\)/,
    '1.88 / 2.00',
    '0.12',
    '0.00',
    /^\d{4}-\d\d-\d\d 00:00:00 UTC$/,
  ])
  t.equal(await page.locator('tr[data-budget^="key:"] td[data-remaining]').getAttribute('data-remaining'), '0.38')

  await page.goto(`${gw.url}/portal/usage?key=${id}`)
  await page.getByRole('heading', { name: 'Budgets' }).waitFor()
  t.equal((await budgetRows(page)).length, 2, 'the usage page shows them too')
  await page.goto(`${gw.url}/portal/usage`)
  t.equal((await budgetRows(page)).length, 2, 'and for all of the user’s keys, each budget once')

  // Spent: the SDK's 429, and the page says nothing is left.
  await t.rejects(
    client.chat.completions.create({ model: MODEL, max_tokens: 400, messages: [{ role: 'user', content: 'hi' }] }),
    { status: 429, code: 'insufficient_quota' },
  )
  await client.chat.completions.create({ model: MODEL, max_tokens: 380, messages: [{ role: 'user', content: 'hi' }] })
  await page.goto(`${gw.url}/portal/keys/${id}`)
  t.match((await budgetRows(page))[0], ['This key', /month/, '0.00 / 0.50', '0.50'])
  t.same(problems, [], 'no console errors')
  await page.close()
})

t.test("the usage page of a user whose keys have made no call yet shows each key's tier budget", async (t) => {
  const bob = await createUser(gw, 'bob', 'bob-password')
  const first = await gw.createKey({ tier: 'Standard4000', owner: bob.id, name: 'first' })
  const second = await gw.createKey({ tier: 'Standard4000', owner: bob.id, name: 'second' })
  await browser.clearCookies() // alice's session
  const page = await browser.newPage()
  await signIn(page, 'bob', 'bob-password')
  await page.goto(`${gw.url}/portal/usage`)
  await page.getByRole('heading', { name: 'Budgets' }).waitFor()
  t.notMatch(await page.locator('main').innerText(), /No budget applies/)
  const rows = await budgetRows(page)
  t.equal(rows.length, 2, 'one per key')
  t.same(
    rows.map((r) => r[0]?.replace(/\s+/g, ' ')),
    [
      `Key second (${String(second.prefix)}…) (the tier's default)`,
      `Key first (${String(first.prefix)}…) (the tier's default)`,
    ],
    'each named by its key, newest first',
  )
  for (const row of rows)
    t.match(row.slice(1, 3), [/per month/, /^4,000\.00 \/ 4,000\.00$/], "Standard4000's 4,000 EUR per month")
  await page.close()
})
