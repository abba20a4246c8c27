// Debian's Chromium, headless, driven by playwright-core (which never downloads a browser of
// its own): one way for the browser tests to open it, in a profile of their own that is
// removed at teardown. .ci/run installs the chromium package.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'
import type { Test } from 'tap'

export const CHROMIUM = '/usr/bin/chromium'
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
]

type ContextOptions = Omit<Parameters<typeof chromium.launchPersistentContext>[1], 'executablePath' | 'args'>

/** Chromium in a fresh profile; the caller closes the context, the profile goes at `t`'s teardown. */
export async function launchChromium(t: Test, options: ContextOptions = {}): Promise<BrowserContext> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`)
  const profile = mkdtempSync(join(tmpdir(), 'tollgate-chromium-'))
  const opened: BrowserContext[] = []
  // The profile is Chromium's until it has exited: a teardown that runs before the caller's
  // close (tap runs them in the order they were made) closes it first (a second close does
  // nothing). Removing it under a live browser once failed with ENOTEMPTY (a file written
  // meanwhile), and the browser left running held the test open until tap's timeout.
  t.teardown(async () => {
    for (const context of opened) await context.close().catch(() => undefined)
    rmSync(profile, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 })
  })
  const context = await chromium.launchPersistentContext(profile, {
    headless: true,
    timeout: 60_000,
    ...options,
    executablePath: CHROMIUM,
    args: ARGS,
  })
  opened.push(context)
  // Every wait of every page (a navigation, a locator, waitForURL) is for a condition; on
  // the loaded 2-core CI machine a page can take longer than Playwright's 30 s default to
  // get there (a sign-in redirect once did), so the bound is wider. A page that never gets
  // there still fails.
  context.setDefaultTimeout(90_000)
  context.setDefaultNavigationTimeout(90_000)
  return context
}
