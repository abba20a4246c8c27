// Starts a real Tollgate process (node src/cli.ts serve) the way an operator would, on
// free ports, with its own data directory, and captures everything it prints.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parse, stringify } from 'yaml'
import { REDIS_URL } from './redis.ts'

const ROOT = resolve(import.meta.dirname, '../..')

export interface StartOptions {
  /** Changes to the default configuration document before it is written. */
  readonly config?: (doc: Record<string, unknown>) => void
  readonly env?: Readonly<Record<string, string>>
  /** Reuse a data directory (for restart tests). */
  readonly dataDir?: string
  readonly adminToken?: string
  /** Another checkout to run (benchmarks compare before and after); default this one. */
  readonly root?: string
  /** Node flags for the gateway process (e.g. --import of a probe). */
  readonly execArgv?: readonly string[]
  /** Keep no per-request log lines below error level (long fuzz and load runs), only the rest. */
  readonly dropRequestLogs?: boolean
  /** Arguments after `serve` (e.g. `--workers 2`). */
  readonly args?: readonly string[]
  /** How long the start may take before it is a failure (default 20 s; a loaded machine takes longer). */
  readonly startTimeoutMs?: number
}

export interface RunningTollgate {
  readonly url: string
  readonly metricsUrl: string
  readonly adminToken: string
  readonly dataDir: string
  /** The configuration file it reads (a reload reads it again). */
  readonly configPath: string
  readonly child: ChildProcess
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  /** JSON log lines so far. */
  logs(): Array<Record<string, unknown>>
  /** Sends a signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>
  /** Creates an API key through the admin API; returns the secret and the record. */
  createKey(body?: Record<string, unknown>): Promise<{ key: string; id: string; [field: string]: unknown }>
}

/** A gateway whose state is on the shared Redis under `prefix`, with a hashing secret of its own (a restart on the same prefix must reuse the options). */
export function onSharedRedis(prefix: string): StartOptions {
  return {
    env: { REDIS_URL, TOLLGATE_KEY_SECRET: randomBytes(24).toString('hex') },
    config: (doc) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = prefix
    },
  }
}

export function defaultConfigDoc(root = ROOT): Record<string, unknown> {
  const doc = parse(readFileSync(join(root, 'config/default.yaml'), 'utf8')) as Record<string, unknown>
  doc.plans = join(root, 'config/plans.yaml')
  return doc
}

export async function startTollgate(options: StartOptions = {}): Promise<RunningTollgate> {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-e2e-'))
  const dataDir = options.dataDir ?? join(dir, 'data')
  const root = options.root ?? ROOT
  const doc = defaultConfigDoc(root)
  // Fast mock streams keep the tests short.
  const backends = doc.backends as Record<string, Record<string, unknown>>
  if (backends.mock) Object.assign(backends.mock, { tokensPerSecond: 2000, fineTuneStepMs: 250 })
  // Tests refuse credentials hundreds of times a minute, all from 127.0.0.1: the throttle
  // of failed authentication would answer 429 to most of them. test/hardening/auth-throttle
  // tests it with its own settings.
  // (Only for this checkout: another one, run for a comparison, may not know the setting.)
  if (options.root === undefined) doc.auth = { maxFailures: 1_000_000 }
  options.config?.(doc)
  const configPath = join(dir, 'config.yaml')
  writeFileSync(configPath, stringify(doc))
  const adminToken = options.adminToken ?? `adm_${randomBytes(16).toString('hex')}`
  const command = [...(options.execArgv ?? []), join(root, 'src/cli.ts'), 'serve', ...(options.args ?? [])]
  const child = spawn(process.execPath, command, {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: '0',
      METRICS_PORT: '0',
      TOLLGATE_CONFIG: configPath,
      TOLLGATE_DATA_DIR: dataDir,
      TOLLGATE_ADMIN_TOKEN: adminToken,
      LOG_LEVEL: 'info',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const keeper = (): ((chunk: string) => void) => {
    let partial = ''
    return (chunk) => {
      if (options.dropRequestLogs !== true) {
        output += chunk
        return
      }
      const lines = (partial + chunk).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) {
        if (line.includes('"msg":"request"') && /"level":[1-4]\d\b/.test(line)) continue
        output += `${line}\n`
      }
    }
  }
  child.stdout.setEncoding('utf8').on('data', keeper())
  child.stderr.setEncoding('utf8').on('data', keeper())
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)))

  const logs = (): Array<Record<string, unknown>> =>
    output
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>]
        } catch {
          return []
        }
      })

  const listening = await new Promise<Record<string, unknown>>((done, fail) => {
    const limit = options.startTimeoutMs ?? 60_000
    const deadline = setTimeout(() => fail(new Error(`tollgate did not start in ${limit} ms:\n${output}`)), limit)
    const check = (): void => {
      const line = logs().find((l) => l.msg === 'tollgate listening')
      if (line) {
        clearTimeout(deadline)
        child.stdout.off('data', check)
        done(line)
      }
    }
    child.stdout.on('data', check)
    void exited.then((code) => {
      clearTimeout(deadline)
      fail(new Error(`tollgate exited with ${code}:\n${output}`))
    })
  })
  const url = String(listening.url)
  const running: RunningTollgate = {
    url,
    metricsUrl: String(listening.metricsUrl),
    adminToken,
    dataDir,
    configPath,
    child,
    output: () => output,
    logs,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null) return child.exitCode
      child.kill(signal)
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
      const code = await exited
      clearTimeout(timer)
      return code
    },
    async createKey(body = {}) {
      const res = await fetch(`${url}/admin/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      const json = (await res.json()) as { key: string; id: string }
      if (res.status !== 201) throw new Error(`create key failed: ${res.status} ${JSON.stringify(json)}`)
      return json
    },
  }
  return running
}

export interface UpstreamProcess {
  readonly url: string
  readonly port: number
  requests(): Promise<
    Array<{
      method: string
      path: string
      headers: Record<string, string>
      model: unknown
      streamOptions: unknown
      body: string
    }>
  >
  stop(): Promise<void>
}

/** Starts test/helpers/upstream-process.ts as a separate OpenAI-compatible server. */
export async function startUpstream(args: string[] = []): Promise<UpstreamProcess> {
  const child = spawn(process.execPath, [join(ROOT, 'test/helpers/upstream-process.ts'), ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<number>((done, fail) => {
    let buffer = ''
    const timer = setTimeout(() => fail(new Error('upstream did not start')), 15_000)
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk
      const line = buffer.split('\n').find((l) => l.startsWith('{"port"'))
      if (line) {
        clearTimeout(timer)
        done((JSON.parse(line) as { port: number }).port)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      fail(new Error(`upstream exited ${code}`))
    })
  })
  const url = `http://127.0.0.1:${port}`
  return {
    url,
    port,
    requests: async () => (await (await fetch(`${url}/__requests`)).json()) as never,
    async stop() {
      if (child.exitCode !== null) return
      const exited = new Promise((done) => child.once('exit', done))
      child.kill('SIGTERM')
      await exited
    },
  }
}

export interface BehindUpstream {
  readonly gw: RunningTollgate
  readonly upstream: UpstreamProcess
  stop(): Promise<void>
}

/**
 * A gateway in front of a separate upstream process (`up`, an `openai` backend) that serves
 * its files, fine-tuning jobs and vector stores, and with `everyModel` every model too.
 * `upstreamKey` makes the upstream require that key and the gateway send it.
 */
export async function startBehindUpstream(
  options: {
    readonly upstreamArgs?: readonly string[]
    readonly everyModel?: boolean
    readonly upstreamKey?: string
  } = {},
): Promise<BehindUpstream> {
  const key = options.upstreamKey
  const upstream = await startUpstream([
    ...(key === undefined ? [] : ['--require-key', key]),
    ...(options.upstreamArgs ?? []),
  ])
  const gw = await startTollgate({
    config: (doc) => {
      doc.backends = {
        ...(doc.backends as object),
        up: {
          type: 'openai',
          baseUrl: `${upstream.url}/v1`,
          ...(key === undefined ? {} : { apiKeyEnv: 'UPSTREAM_KEY' }),
        },
      }
      doc.resourceBackend = 'up'
      if (options.everyModel)
        for (const model of doc.models as Array<{ deployments: unknown[] }>) model.deployments = [{ backend: 'up' }]
    },
    ...(key === undefined ? {} : { env: { UPSTREAM_KEY: key } }),
  })
  return {
    gw,
    upstream,
    async stop() {
      await gw.stop()
      await upstream.stop()
    },
  }
}

/** A loopback port with nothing listening on it. */
export async function closedPort(): Promise<number> {
  const { createServer } = await import('node:net')
  const server = createServer()
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  const port = (server.address() as { port: number }).port
  await new Promise<void>((done) => server.close(() => done()))
  return port
}
