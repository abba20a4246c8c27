// The admin commands find the gateway as it was started: on its PORT (not 8080 whatever it
// says), with the admin token an embedded gateway keeps in its data directory (the one
// `tollgate admin-token` prints), the same for every command; TOLLGATE_URL and
// TOLLGATE_ADMIN_TOKEN still win.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { gatewayUrlOf } from '../../src/store/data-dir-lock.ts'
import { runTollgate } from '../helpers/cli.ts'
import { closedPort, startTollgate } from '../helpers/gateway.ts'

const port = await closedPort()
// No TOLLGATE_ADMIN_TOKEN: the gateway makes one and keeps it in its data directory.
const gw = await startTollgate({ env: { PORT: String(port), TOLLGATE_ADMIN_TOKEN: '' } })
t.teardown(() => gw.stop())
const asStarted = { PORT: String(port), TOLLGATE_DATA_DIR: gw.dataDir, TOLLGATE_CONFIG: gw.configPath }

t.test('every admin command: the gateway on PORT, the stored admin token', async (t) => {
  for (const args of [
    ['backends', 'list'],
    ['keys', 'list'],
    ['users', 'list'],
    ['queue', 'list'],
    ['webhooks', 'list'],
    ['budgets', 'list'],
    ['reload'],
  ]) {
    const run = await runTollgate(args, asStarted)
    t.equal(run.code, 0, `tollgate ${args.join(' ')}: ${run.stderr}`)
  }
  const token = await runTollgate(['admin-token'], asStarted)
  t.equal(token.code, 0, 'admin-token reads the same token')
  const withFlag = await runTollgate(['backends', 'list', '--admin-token', token.stdout.trim()], {
    PORT: String(port),
  })
  t.equal(withFlag.code, 0, 'the flag works without the data directory')
})

t.test('TOLLGATE_URL and TOLLGATE_ADMIN_TOKEN win', async (t) => {
  const elsewhere = await runTollgate(['backends', 'list'], { ...asStarted, TOLLGATE_URL: 'http://127.0.0.1:9' })
  t.equal(elsewhere.code, 1, 'TOLLGATE_URL is called, not PORT')
  t.match(elsewhere.stderr, /127\.0\.0\.1:9/)
  const wrong = await runTollgate(['backends', 'list'], { ...asStarted, TOLLGATE_ADMIN_TOKEN: 'not-the-token' })
  t.equal(wrong.code, 1, 'TOLLGATE_ADMIN_TOKEN is sent, not the stored one')
  t.match(wrong.stderr, /admin token/i)
})

t.test('no token anywhere: says where it looked', async (t) => {
  const empty = mkdtempSync(join(tmpdir(), 'tg-cli-nodir-'))
  const run = await runTollgate(['keys', 'list'], { PORT: String(port), TOLLGATE_DATA_DIR: empty })
  t.equal(run.code, 64)
  t.match(run.stderr, 'set TOLLGATE_ADMIN_TOKEN (or pass --admin-token)')
  t.match(run.stderr, join(empty, 'admin.token'))
})

t.test('PORT not in this shell: the address the gateway recorded in its data directory', async (t) => {
  // Started on a port chosen elsewhere (another shell's PORT, `serve --port`): only the data
  // directory knows it.
  t.equal(gatewayUrlOf(gw.dataDir), gw.url, 'the running gateway recorded where it listens')
  const run = await runTollgate(['keys', 'list'], { TOLLGATE_DATA_DIR: gw.dataDir, TOLLGATE_CONFIG: gw.configPath })
  t.equal(run.code, 0, `found without PORT: ${run.stderr}`)
  // A gateway killed without its last words leaves its file: a process that is gone is not believed.
  const stale = mkdtempSync(join(tmpdir(), 'tg-cli-stale-'))
  writeFileSync(
    join(stale, 'tollgate.pid'),
    JSON.stringify({ pid: 2 ** 22 + 1, startedAt: new Date().toISOString(), url: gw.url }),
  )
  t.equal(gatewayUrlOf(stale), undefined, 'a dead holder names no address')
})
