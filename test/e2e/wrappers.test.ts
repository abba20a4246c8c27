// Signals sent to what an operator started (issue 37, item 2): `npm start`, `npx tollgate
// serve`, `bin/tollgate` on the machine's own Node (which re-executes on the pinned Node).
// Whichever pid is signalled, the gateway drains and frees the data directory's lock (a
// SIGTERM passed on, or the gateway noticing its npm is gone), a SIGHUP to the wrapper
// reloads, and the start line names the gateway's own pid.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t, { type Test } from 'tap'
import { lockDataDir } from '../../src/store/data-dir-lock.ts'
import { pollUntil } from '../helpers/poll.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const BIN = join(ROOT, 'bin/tollgate')

/** The machine's own Node (older than the pinned one here), else this one. */
function systemNode(): string {
  for (const path of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (spawnSync(path, ['--version']).status === 0) return path
  }
  return process.execPath
}

/** Whether a process is running (a zombie nobody reaped is not). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

interface Started {
  readonly wrapper: ChildProcess
  readonly dataDir: string
  /** The gateway's pid, from its start line. */
  readonly pid: number
  /** The start line. */
  readonly line: Record<string, unknown>
  output(): string
}

/**
 * Runs `command` as a user's shell would (no tap hooks in the environment) and waits for
 * the start line.
 */
async function start(t: Test, command: readonly string[]): Promise<Started> {
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tollgate-wrappers-')), 'data')
  const env = [
    'PATH=/usr/local/bin:/usr/bin:/bin',
    `HOME=${process.env.HOME ?? ''}`,
    'PORT=0',
    'METRICS_PORT=0',
    `TOLLGATE_DATA_DIR=${dataDir}`,
    `TOLLGATE_ADMIN_TOKEN=adm_${randomBytes(16).toString('hex')}`,
    'LOG_LEVEL=info',
    'npm_config_update_notifier=false',
  ]
  const wrapper = spawn('/usr/bin/env', ['-i', ...env, ...command], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  wrapper.stdout?.setEncoding('utf8').on('data', (c: string) => (output += c))
  wrapper.stderr?.setEncoding('utf8').on('data', (c: string) => (output += c))
  t.teardown(() => {
    if (wrapper.exitCode === null) wrapper.kill('SIGKILL')
  })
  const line = await new Promise<Record<string, unknown>>((done, fail) => {
    const look = (): void => {
      const found = output
        .split('\n')
        .filter((l) => l.startsWith('{') && l.includes('"tollgate listening"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)[0]
      if (found !== undefined) done(found)
    }
    wrapper.stdout?.on('data', look)
    wrapper.once('exit', () => fail(new Error(`${command.join(' ')} exited:\n${output}`)))
  })
  const pid = Number(line.pid)
  t.teardown(() => {
    if (running(pid)) process.kill(pid, 'SIGKILL')
  })
  return { wrapper, dataDir, pid, line, output: () => output }
}

/**
 * The gateway has ended and its data directory can be taken. Bounded at a minute: a drain on a
 * loaded machine (CI runs the suite on two busy cores) has been seen to outlast 15 s.
 */
async function gatewayGone(t: Test, started: Started, what: string): Promise<void> {
  const ended = await pollUntil(
    async () => running(started.pid),
    (alive) => !alive,
    1200,
    50,
  )
  t.ok(ended.met, `${what}: the gateway (pid ${started.pid}) ended`)
  const lock = lockDataDir(started.dataDir)
  lock.release()
  t.pass(`${what}: the data directory's lock is free`)
}

t.test('the start line names the gateway pid; bin/tollgate passes Node flags, SIGHUP and SIGTERM on', async (t) => {
  // npm start's flags, given to the machine's Node: the pinned Node runs with them.
  const started = await start(t, [systemNode(), '--max-semi-space-size=8', '--expose-gc', BIN, 'serve'])
  t.ok(running(started.pid), 'the start line names a running pid')
  t.equal(started.line.heapCompacted, true, 'the heap compaction has its --expose-gc')
  const argv = readFileSync(`/proc/${started.pid}/cmdline`, 'utf8').split('\0')
  t.ok(argv.includes('--max-semi-space-size=8'), 'and the semi-space size')
  started.wrapper.kill('SIGHUP')
  const reloaded = await pollUntil(
    async () => started.output(),
    (out) => out.includes('configuration reload'),
    300,
    50,
  )
  t.ok(reloaded.met, 'SIGHUP to the wrapper: the gateway reloads')
  t.ok(running(started.pid), 'and runs on')
  started.wrapper.kill('SIGTERM')
  await gatewayGone(t, started, 'SIGTERM to bin/tollgate')
  t.match(started.output(), /"signal":"SIGTERM"/, 'it drained on SIGTERM')
})

t.test('npm start: SIGTERM to npm stops the gateway', async (t) => {
  const started = await start(t, ['npm', 'start'])
  t.not(started.pid, started.wrapper.pid)
  started.wrapper.kill('SIGTERM')
  await gatewayGone(t, started, 'SIGTERM to npm start')
})

t.test('npm start: SIGHUP to npm (which npm does not pass on) stops the gateway too', async (t) => {
  const started = await start(t, ['npm', 'start'])
  started.wrapper.kill('SIGHUP')
  await gatewayGone(t, started, 'SIGHUP to npm start')
  t.match(started.output(), /that started the gateway ended/)
})

t.test('npx tollgate serve: SIGTERM to npx stops the gateway', async (t) => {
  const started = await start(t, ['npx', '--no-install', 'tollgate', 'serve'])
  started.wrapper.kill('SIGTERM')
  await gatewayGone(t, started, 'SIGTERM to npx')
})
