// `tollgate serve` as an operator starts it a second time, or on a busy port: the message
// says what is in use and which setting changes it, nothing is made in the data directory
// first, the flags are taken (or refused), and one data directory has one gateway.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { closedPort, defaultConfigDoc, startTollgate } from '../helpers/gateway.ts'
import { stringify } from 'yaml'

const ROOT = resolve(import.meta.dirname, '../..')
const CLI = join(ROOT, 'src/cli.ts')

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

const configPath = (() => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-serve-config-'))
  const path = join(dir, 'config.yaml')
  writeFileSync(path, stringify(defaultConfigDoc()))
  return path
})()

/** `tollgate serve …` that is expected to stop by itself; killed if it does not within 30 s. */
function serveOnce(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done) => {
    const child = spawn(process.execPath, [CLI, 'serve', ...args], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        TOLLGATE_CONFIG: configPath,
        LOG_LEVEL: 'info',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c
    })
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c
    })
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      done({ code, stdout, stderr })
    })
  })
}

const freshDataDir = (): string => join(mkdtempSync(join(tmpdir(), 'tg-serve-data-')), 'data')
const portOf = (url: string): string => new URL(url).port

t.test('ports in use: said with the setting to change, before any secret is made', async (t) => {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())

  const dataDir = freshDataDir()
  const second = await serveOnce([], { TOLLGATE_DATA_DIR: dataDir, PORT: portOf(gw.url), METRICS_PORT: '0' })
  t.equal(second.code, 2, 'a second gateway on the same port: exit 2')
  const port = portOf(gw.url)
  t.match(second.stderr, `tollgate: 127.0.0.1:${port}, the public listener (PORT), is already in use`, 'what is in use')
  t.match(second.stderr, `PORT=${Number(port) + 1} npm start`, 'and how to change it')
  t.match(second.stderr, `tollgate serve --port ${Number(port) + 1}`)
  t.notMatch(second.stderr, /EADDRINUSE\b.*\n.*at /, 'no stack trace')
  t.notMatch(second.stderr + second.stdout, /tgadm_/, 'no admin token printed')
  t.notOk(existsSync(join(dataDir, 'admin.token')), 'none made')
  t.notOk(existsSync(dataDir) && readdirSync(dataDir).length > 0, 'nothing made in the data directory')

  const metrics = await serveOnce([], {
    TOLLGATE_DATA_DIR: freshDataDir(),
    PORT: '0',
    METRICS_PORT: portOf(gw.metricsUrl),
  })
  t.equal(metrics.code, 2)
  t.match(
    metrics.stderr,
    `127.0.0.1:${portOf(gw.metricsUrl)}, the metrics listener (METRICS_PORT), is already in use`,
    'the metrics port is named as such',
  )
  t.match(metrics.stderr, /METRICS_PORT=\d+ npm start/)
  t.match(metrics.stderr, /--metrics-port \d+/)

  const flag = await serveOnce(['--port', port, '--metrics-port', '0'], { TOLLGATE_DATA_DIR: freshDataDir() })
  t.equal(flag.code, 2, "--port is taken: the clash is found on the flag's port too")
  t.match(flag.stderr, `127.0.0.1:${port}, the public listener (PORT), is already in use`)
})

t.test('serve --port, --host and --metrics-port are taken; other flags are refused', async (t) => {
  const port = await closedPort()
  const metricsPort = await closedPort()
  // startTollgate runs `serve` bare; the flags are checked on a process of our own.
  const child = spawn(
    process.execPath,
    [CLI, 'serve', '--port', String(port), '--host', '127.0.0.1', '--metrics-port', String(metricsPort)],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        TOLLGATE_CONFIG: configPath,
        TOLLGATE_DATA_DIR: freshDataDir(),
        PORT: '0',
        METRICS_PORT: '0',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  const listening = await new Promise<Record<string, unknown>>((done, fail) => {
    let out = ''
    const timer = setTimeout(() => fail(new Error(`not listening in 20 s: ${out}`)), 20_000)
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c
      const line = out.split('\n').find((l) => l.includes('"msg":"tollgate listening"'))
      if (line !== undefined) {
        clearTimeout(timer)
        done(JSON.parse(line) as Record<string, unknown>)
      }
    })
    void exited.then((code) => {
      clearTimeout(timer)
      fail(new Error(`exited ${code}: ${out}`))
    })
  })
  t.equal(listening.port, port, '--port over PORT')
  t.equal(listening.metricsPort, metricsPort, '--metrics-port over METRICS_PORT')
  t.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200, 'and it answers there')
  child.kill('SIGTERM')
  t.equal(await exited, 0)

  for (const [args, message] of [
    [['--prot', '8120'], /serve: Unknown option '--prot'/],
    [['8120'], /serve: .*positional/i],
    [['--port', '80a'], /--port must be a port number, 0 to 65535/],
    [['--port', '70000'], /--port must be a port number/],
  ] as const) {
    const run = await serveOnce([...args], { TOLLGATE_DATA_DIR: freshDataDir() })
    t.equal(run.code, 64, `serve ${args.join(' ')}: exit 64`)
    t.match(run.stderr, message)
  }
})

t.test('one gateway per data directory; a killed one does not block the next', async (t) => {
  const first = await startTollgate()
  const second = await serveOnce([], {
    TOLLGATE_DATA_DIR: first.dataDir,
    PORT: '0',
    METRICS_PORT: '0',
    TOLLGATE_ADMIN_TOKEN: first.adminToken,
  })
  t.equal(second.code, 2, 'a second gateway on the same data directory: exit 2')
  t.match(second.stderr, `another Tollgate (pid ${first.child.pid}, started `, 'names the one running')
  t.match(second.stderr, `is running on the data directory ${first.dataDir}`)
  t.match(second.stderr, /TOLLGATE_DATA_DIR/, 'and how to run a second one')
  t.equal((await fetch(`${first.url}/healthz`)).status, 200, 'the first is untouched')

  t.equal(await first.stop('SIGKILL'), null, 'killed (-9)')
  const third = await startTollgate({ dataDir: first.dataDir, adminToken: first.adminToken })
  t.teardown(() => third.stop())
  t.equal((await fetch(`${third.url}/healthz`)).status, 200, 'the next start takes the directory at once')
})
