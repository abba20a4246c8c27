// What a new user meets on a fresh clone: the admin token made on the first start is kept
// and works after a restart (and `tollgate admin-token` shows or replaces it); the gateway
// listens on loopback unless told otherwise; `bin/tollgate` works from a checkout on the
// machine's own Node, whatever its version.
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const CLI = join(ROOT, 'src/cli.ts')
const BIN = join(ROOT, 'bin/tollgate')

/** The token printed on stderr at the first start, if any. */
const printedToken = (output: string): string | undefined => /^\s+(tgadm_\S+)$/m.exec(output)?.[1]

const adminStatus = async (url: string, token: string): Promise<number> =>
  (await fetch(`${url}/admin/keys`, { headers: { authorization: `Bearer ${token}` } })).status

/** Whether a running gateway comes to take `token` within seconds (after a reset it picks up the stored one). */
const takesToken = async (url: string, token: string): Promise<boolean> =>
  (
    await pollUntil(
      () => adminStatus(url, token),
      (status) => status === 200,
      60,
      100,
    )
  ).met

function cli(
  args: string[],
  dataDir: string,
  env: Record<string, string> = {},
): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(process.execPath, [CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', TOLLGATE_DATA_DIR: dataDir, ...env },
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20_000,
  })
}

t.test('without TOLLGATE_ADMIN_TOKEN: one token, made on the first start, kept across restarts', async (t) => {
  // An empty value is how the harness leaves the variable unset.
  const first = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  const token = printedToken(first.output())
  t.ok(token, 'the first start printed a token')
  if (!token) return
  t.ok(
    first.output().includes(`TOLLGATE_DATA_DIR=${JSON.stringify(first.dataDir)} npx tollgate admin-token`),
    'and the command that shows it again from another shell, naming its data directory',
  )
  t.equal(await adminStatus(first.url, token), 200, 'and it works')
  const file = join(first.dataDir, 'admin.token')
  t.equal(readFileSync(file, 'utf8').trim(), token, 'it is kept in the data directory')
  t.equal(statSync(file).mode & 0o777, 0o600, 'readable by its owner only')
  t.notMatch(
    first
      .logs()
      .map((l) => JSON.stringify(l))
      .join('\n'),
    token,
    'and never in the JSON logs',
  )
  t.equal(await first.stop(), 0)

  const second = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' }, dataDir: first.dataDir })
  t.teardown(() => second.stop())
  t.equal(printedToken(second.output()), undefined, 'the second start prints no token')
  t.equal(await adminStatus(second.url, token), 200, 'the first token still works after the restart')

  const shown = cli(['admin-token'], first.dataDir)
  t.equal(shown.status, 0)
  t.equal(shown.stdout.trim(), token, '`tollgate admin-token` shows it, alone on stdout')

  // The README: `export TOLLGATE_ADMIN_TOKEN=$(npx tollgate admin-token)`; later commands
  // in that shell run with it set, and still work.
  const exported = { TOLLGATE_ADMIN_TOKEN: shown.stdout.trim() }
  const again = cli(['admin-token'], first.dataDir, exported)
  t.equal(again.status, 0, `admin-token with the token exported: exit 0 ${again.stderr}`)
  t.equal(again.stdout.trim(), token, 'and the same token')
  t.equal(again.stderr, '', 'with nothing to warn about')

  const reset = cli(['admin-token', '--reset'], first.dataDir, exported)
  t.equal(reset.status, 0, `--reset with the token exported: exit 0 ${reset.stderr}`)
  t.match(
    reset.stderr,
    /TOLLGATE_ADMIN_TOKEN in this environment still holds the previous token: `export TOLLGATE_ADMIN_TOKEN=\$\(npx tollgate admin-token\)` takes the new one/,
  )
  const fresh = reset.stdout.trim()
  const stale = cli(['admin-token'], first.dataDir, exported)
  t.equal(stale.status, 0)
  t.equal(stale.stdout.trim(), fresh, 'the stale shell is shown the new token')
  t.match(stale.stderr, /differs from the token stored/, 'and told its copy differs')
  t.match(fresh, /^tgadm_/, '--reset prints a new one')
  t.not(fresh, token)
  t.ok(await takesToken(second.url, fresh), 'the running gateway takes the new token within seconds')
  t.equal(await adminStatus(second.url, token), 401, 'and refuses the old one')
})

t.test(
  'with TOLLGATE_ADMIN_TOKEN set and none stored, or with Redis, nothing is made and admin-token says why',
  async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tg-admintoken-'))
    const withEnv = spawnSync(process.execPath, [CLI, 'admin-token'], {
      env: {
        PATH: process.env.PATH ?? '',
        TOLLGATE_DATA_DIR: dataDir,
        TOLLGATE_ADMIN_TOKEN: 'mine-0123456789abcdef0123456789abcdef',
      },
      cwd: ROOT,
      encoding: 'utf8',
    })
    t.equal(withEnv.status, 1)
    t.match(
      withEnv.stderr,
      /no admin token is stored in .*admin\.token: a gateway started with TOLLGATE_ADMIN_TOKEN set uses that and stores none/,
    )
    t.equal(withEnv.stdout, '', 'no token printed')
    t.notOk(existsSync(join(dataDir, 'admin.token')), 'and none made')
    const withRedis = spawnSync(process.execPath, [CLI, 'admin-token'], {
      env: { PATH: process.env.PATH ?? '', TOLLGATE_DATA_DIR: dataDir, REDIS_URL: 'redis://127.0.0.1:6379' },
      cwd: ROOT,
      encoding: 'utf8',
    })
    t.equal(withRedis.status, 1)
    t.match(withRedis.stderr, /only from TOLLGATE_ADMIN_TOKEN/)
  },
)

t.test('a gateway started from the shell that exported the stored token still takes a reset', async (t) => {
  const first = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  const token = printedToken(first.output())
  t.ok(token)
  if (!token) return
  t.equal(await first.stop(), 0)
  // `npm start` again in the shell where the README's export ran.
  const gw = await startTollgate({ adminToken: token, dataDir: first.dataDir })
  t.teardown(() => gw.stop())
  t.equal(await adminStatus(gw.url, token), 200)
  const reset = cli(['admin-token', '--reset'], first.dataDir, { TOLLGATE_ADMIN_TOKEN: token })
  t.equal(reset.status, 0, reset.stderr)
  const fresh = reset.stdout.trim()
  t.ok(await takesToken(gw.url, fresh), 'the new token works')
  t.equal(await adminStatus(gw.url, token), 401, "the replaced one does not, though the gateway's environment holds it")
})

t.test('the listeners are bound to loopback by default, and the log says where', async (t) => {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  const line = gw.logs().find((l) => l.msg === 'tollgate listening')
  t.match(line?.address, /^127\.0\.0\.1:\d+$/, `public listener: ${line?.address}`)
  t.match(line?.metricsAddress, /^127\.0\.0\.1:\d+$/, `metrics listener: ${line?.metricsAddress}`)
  // PORT and METRICS_PORT are all it listens on: the built-in RAG mock takes no port.
  const ports = listeningPorts(gw.child.pid ?? 0)
  t.same(
    ports.sort((a, b) => a - b),
    [Number(line?.port), Number(line?.metricsPort)].sort((a, b) => a - b),
    `TCP listeners: ${ports.join(', ')}`,
  )
  t.match(line?.ragMock, /^unix:\//, 'the RAG mock on a Unix socket')
  const onAll = await startTollgate({ env: { HOST: '0.0.0.0' } })
  t.teardown(() => onAll.stop())
  t.match(
    onAll.logs().find((l) => l.msg === 'tollgate listening')?.address,
    /^0\.0\.0\.0:\d+$/,
    'HOST=0.0.0.0 faces the network, and the log says so',
  )
})

/** The TCP ports process `pid` listens on (Linux: its socket inodes in /proc/net/tcp and tcp6). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set(
    readdirSync(`/proc/${pid}/fd`).flatMap((fd) => {
      try {
        return [/^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? '']
      } catch {
        return []
      }
    }),
  )
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((table) =>
    readFileSync(table, 'utf8')
      .split('\n')
      .slice(1)
      .map((row) => row.trim().split(/\s+/))
      // local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 is the inode.
      .filter((f) => f[3] === '0A' && inodes.has(f[9] ?? ''))
      .map((f) => parseInt(f[1]?.split(':')[1] ?? '0', 16)),
  )
}

/** The machine's own Node, if it has one outside node_modules (CI machines ship Node 20). */
function systemNode(): { path: string; major: number } | null {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node']) {
    const run = spawnSync(path, ['--version'], { encoding: 'utf8' })
    if (run.status === 0) return { path, major: Number(/^v(\d+)/.exec(run.stdout)?.[1]) }
  }
  return null
}

t.test("bin/tollgate from a checkout runs on the machine's own Node", async (t) => {
  const node = systemNode() ?? { path: process.execPath, major: Number(process.versions.node.split('.')[0]) }
  // Through `env -i`: tap hooks the processes a test spawns (NODE_OPTIONS with its own
  // loader, for Node 24), which a user's shell would not.
  const run = (args: string[], cwd: string, extra: Record<string, string> = {}) =>
    spawnSync(
      '/usr/bin/env',
      [
        '-i',
        'PATH=/usr/local/bin:/usr/bin:/bin',
        `HOME=${process.env.HOME ?? ''}`,
        ...Object.entries(extra).map(([k, v]) => `${k}=${v}`),
        node.path,
        ...args,
      ],
      { cwd, encoding: 'utf8', timeout: 20_000 },
    )
  const help = run([BIN, 'help'], ROOT)
  t.equal(help.status, 0, `node ${node.major}: exit 0`, { stderr: help.stderr })
  t.match(help.stdout, /Usage: tollgate <command>/, `node ${node.major}: the help text`)
  t.notMatch(help.stderr, /ERR_UNKNOWN_FILE_EXTENSION/)
  const serve = run([BIN, 'keys', 'list'], ROOT, { TOLLGATE_URL: 'http://127.0.0.1:9', TOLLGATE_ADMIN_TOKEN: 'x' })
  t.equal(serve.status, 1, `node ${node.major}: a real command runs too (and says it cannot reach the gateway)`)
  t.match(serve.stderr, /reach|connect/i)

  // The README's stand-alone RAG mock, on the same Node.
  const mock = spawn(
    '/usr/bin/env',
    [
      '-i',
      'PATH=/usr/local/bin:/usr/bin:/bin',
      `HOME=${process.env.HOME ?? ''}`,
      node.path,
      BIN,
      'rag-mock',
      '--port',
      '0',
      '--service',
      'file-manager',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  t.teardown(() => {
    if (mock.exitCode === null) mock.kill('SIGKILL')
  })
  let mockErr = ''
  mock.stderr.setEncoding('utf8').on('data', (c: string) => {
    mockErr += c
  })
  const line = await new Promise<string>((done) => {
    let out = ''
    mock.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c
      if (out.includes('\n')) done(out.split('\n')[0] ?? '')
    })
    mock.once('exit', () => done(out))
  })
  t.notMatch(mockErr, /ERR_UNKNOWN_FILE_EXTENSION/)
  const started = JSON.parse(line || '{}') as { port?: number; service?: string }
  t.equal(started.service, 'file-manager', `node ${node.major}: \`tollgate rag-mock\` prints its port line ${mockErr}`)
  t.ok(
    started.port !== undefined && (await fetch(`http://127.0.0.1:${started.port}/`)).status > 0,
    'and answers on that port',
  )
  const exited = new Promise<number | null>((done) => mock.once('exit', (code) => done(code)))
  mock.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM stops it')

  if (node.major < 24) {
    // Without node_modules there is no Node 24 to hand over to: one clear line instead.
    const bare = mkdtempSync(join(tmpdir(), 'tg-bare-checkout-'))
    cpSync(join(ROOT, 'bin'), join(bare, 'bin'), { recursive: true })
    cpSync(join(ROOT, 'package.json'), join(bare, 'package.json'))
    const refused = run([join(bare, 'bin/tollgate'), 'help'], bare)
    t.equal(refused.status, 1, 'without node_modules: exit 1')
    t.equal(refused.stderr.trim().split('\n').length, 1, 'one line')
    t.match(refused.stderr, /needs Node\.js 24 or later \(this is v\d+/, 'that says what is missing')
    t.match(refused.stderr, /npm install/, 'and what to run')
  } else {
    t.comment(`the machine's Node is ${node.major}: nothing to hand over to, checked that it runs directly`)
  }
})
