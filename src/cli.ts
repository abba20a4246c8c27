// The `tollgate` command: serve, plans import, openapi (and, through the admin API, keys and users).
import { readFileSync } from 'node:fs'
import { basename, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { stringify } from 'yaml'
import { ConfigError, loadConfig, readConfigFile } from './config/load.ts'
import { plansSchema, type Config } from './config/schema.ts'
import type * as WorkersRoom from './runtime/workers.ts'
import { importPlanCatalogue } from './limits/plan-catalogue.ts'
import { watchLauncher } from './cli/launcher-watch.ts'
import type { CliIo } from './cli/subcommands.ts'
import { createLogger, type Logger } from './observability/logger.ts'

const USAGE = `Usage: tollgate <command>

Commands:
  serve [--port N] [--host H] [--metrics-port N] [--metrics-host H] [--workers N|auto]
                             Start the gateway (config: TOLLGATE_CONFIG or config/default.yaml;
                             the flags override PORT, HOST, METRICS_PORT, METRICS_HOST;
                             --workers: N processes on one port, auto one per core; needs Redis)
  plans import <file.json> [--default-tier NAME]
                             Convert the provider's plan catalogue export (legacy, 2026-01-19
                             or 2026-04-24 format) to plans YAML (stdout)
  admin-token [--reset]      Show the admin token kept in the data directory (embedded mode),
                             or replace it; a running gateway takes the new one within a second
  keys <command>             Manage API keys through a running gateway (tollgate keys help)
  users <command>            Manage RAG gateway accounts through a running gateway (tollgate users help)
  queue <command>            Inspect and cancel queued requests (tollgate queue help)
  backends list              Each model's deployments and their capacity now (tollgate backends help)
  webhooks <command>         Webhook endpoints and their deliveries (tollgate webhooks help)
  reload [--all]             A running gateway (--all: every instance on its Redis) reads its
                             configuration file again, as SIGHUP does (tollgate reload --help)
  budgets <command>          Spend limits of keys, owners, tenants: list, show, set, clear (tollgate budgets help)
  openapi                    Print the gateway's OpenAPI 3.1 document (as served at /openapi.json)
  rag-mock [--port N] [--service NAME]
                             Run the mock RAG backend on its own, standing in for one service;
                             prints {"port": N, "service": ...} (tollgate rag-mock --help)
  help                       Show this help
`

const SERVE_OPTIONS = {
  port: { type: 'string' },
  host: { type: 'string' },
  'metrics-port': { type: 'string' },
  'metrics-host': { type: 'string' },
  workers: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

/**
 * `serve [--port N] [--host H] [--metrics-port N] [--metrics-host H]`: the flags stand for
 * PORT, HOST, METRICS_PORT and METRICS_HOST, over the environment and the file. Anything
 * else is refused: a flag silently ignored (`--port 8120` once was) leaves a gateway on a
 * port nobody asked for.
 */
function serveOverrides(args: string[]): Record<string, string> {
  let values: {
    port?: string
    host?: string
    'metrics-port'?: string
    'metrics-host'?: string
    workers?: string
    help?: boolean
  }
  try {
    const parsed = parseArgs({ args, options: SERVE_OPTIONS, strict: true, allowPositionals: false })
    values = parsed.values
  } catch (err) {
    throw new UsageError(`serve: ${(err as Error).message}`)
  }
  const env: Record<string, string> = {}
  for (const [flag, name, problemOf] of SERVE_ENV) {
    const value = values[flag]
    if (value === undefined) continue
    const problem = problemOf(value)
    if (problem !== undefined) throw new UsageError(`serve: --${flag} ${problem}`)
    env[name] = value
  }
  return env
}

const portProblem = (value: string): string | undefined =>
  !/^\d{1,5}$/.test(value) || Number(value) > 65535
    ? `must be a port number, 0 to 65535 (0: any free port), got "${value.slice(0, 20)}"`
    : undefined
const hostProblem = (value: string): string | undefined =>
  value === '' ? 'needs an address, e.g. 127.0.0.1 or 0.0.0.0' : undefined

/** serve's flags: the variable each stands for, and what is wrong with a value it refuses. */
const SERVE_ENV: ReadonlyArray<
  readonly ['port' | 'metrics-port' | 'host' | 'metrics-host', string, (value: string) => string | undefined]
> = [
  ['port', 'PORT', portProblem],
  ['metrics-port', 'METRICS_PORT', portProblem],
  ['host', 'HOST', hostProblem],
  ['metrics-host', 'METRICS_HOST', hostProblem],
]

async function serve(args: string[]): Promise<void> {
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE)
    return
  }
  // A reload (SIGHUP, tollgate reload) reads the file again with the same flags' overrides.
  const loadOptions = { overrides: serveOverrides(args) }
  const loaded = readConfigFile(loadOptions)
  const { config } = loaded
  // --workers N|auto: a primary that forks N gateways on one port (runtime/workers.ts).
  const workersFlag = parseArgs({ args, options: SERVE_OPTIONS, strict: true }).values.workers
  const workers = workersFlag === undefined ? undefined : await import('./runtime/workers.ts')
  const count = workers && workersFlag !== undefined ? wantedWorkers(workers, workersFlag, config) : 1
  const log = workers?.isWorker()
    ? createLogger(config.logging.level).child({ pid: process.pid })
    : createLogger(config.logging.level)
  // Under npm, a signal to the npm pid (which npm may not pass on) ends the gateway too. Watched
  // from the start: an npm that ended while the gateway was starting is acted on once it runs.
  const launcher = onLauncherGone(log)
  if (workers && count > 1 && !workers.isWorker()) {
    const primary = await workers.runPrimary({ count, config, log })
    launcher.whenGone(() => primary.stop('SIGTERM'))
    return
  }
  // A SIGHUP before the gateway listens would end the process (Node's default): said and ignored.
  const early = (): void => log.warn('SIGHUP before the gateway is ready: ignored; send it again once it listens')
  process.on('SIGHUP', early)
  // Loaded here so that `plans import` and `help` do not load the whole gateway.
  const { startGateway } = await import('./main.ts')
  const gateway = await startGateway(config, log, {
    loaded,
    load: () => readConfigFile(loadOptions),
    ...(workers?.isWorker() ? { worker: { adminReloader: workers.reloadingSiblings } } : {}),
  })
  if (workers?.isWorker()) workers.workerSide(gateway)
  // The reloader logs its outcome; nothing else to do with it here.
  process.off('SIGHUP', early)
  process.on('SIGHUP', () => {
    gateway.reload().catch((err: unknown) => log.error({ err }, 'configuration reload failed'))
  })
  let stopping = false
  const stop = (signal: string): void => {
    if (stopping) return
    stopping = true
    log.info({ signal }, 'shutting down')
    gateway.shutdown().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', () => stop('SIGTERM'))
  process.on('SIGINT', () => stop('SIGINT'))
  launcher.whenGone(() => stop('launcher gone'))
}

/**
 * Watches the npm that launched this process (launcher-watch.ts) from now on; `whenGone(act)` runs
 * `act` when it ends, at once if it already has. Without npm: never.
 */
function onLauncherGone(log: Logger): { whenGone(act: () => void): void } {
  let gone = false
  let action: (() => void) | undefined
  watchLauncher(process.env, (launcher) => {
    log.warn({ launcher }, `the npm (pid ${launcher}) that started the gateway ended; signal the gateway's own pid`)
    gone = true
    action?.()
  })
  return {
    whenGone(act) {
      action = act
      if (gone) act()
    },
  }
}

/** How many processes `--workers` asks for; a bad value or the embedded store with more than one is refused. */
function wantedWorkers(workers: typeof WorkersRoom, flag: string, config: Config): number {
  let count: number
  try {
    count = workers.workerCount(flag)
  } catch (err) {
    throw new UsageError(`serve: ${(err as Error).message}`)
  }
  const refusal = workers.workersRefusal(count, config, flag)
  if (refusal !== undefined) {
    const error = new Error(refusal)
    error.name = 'StartupError'
    throw error
  }
  return count
}

/** The command-line clients' I/O: this process's environment and streams. */
function processIo(): CliIo {
  return {
    env: process.env,
    stdout: (text) => {
      process.stdout.write(text)
    },
    stderr: (text) => {
      process.stderr.write(text)
    },
  }
}

function importPlans(args: string[]): void {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { 'default-tier': { type: 'string' } },
  })
  const file = positionals[0]
  if (!file) throw new UsageError('plans import needs the path of a plan catalogue JSON file')
  let input: unknown
  try {
    input = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    throw new Error(
      `${file}: ${err instanceof SyntaxError ? 'not valid JSON' : ((err as NodeJS.ErrnoException).code ?? String(err))}`,
      { cause: err },
    )
  }
  const { plans, notes } = importPlanCatalogue(input, { defaultTier: values['default-tier'], source: basename(file) })
  // Validated as the gateway will validate it, so that what is printed boots.
  const checked = plansSchema.safeParse(plans)
  if (!checked.success)
    throw new Error(
      `the converted plans are not valid: ${checked.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    )
  process.stdout.write(`# Generated by \`tollgate plans import ${file}\`. Edit freely; validated at boot.\n`)
  for (const note of notes) {
    process.stdout.write(`# ${note}\n`)
    process.stderr.write(`tollgate: ${note}\n`)
  }
  process.stdout.write(stringify(plans, { lineWidth: 0 }))
}

/**
 * The stored admin token, printed alone on stdout (so `$(npx tollgate admin-token)` works).
 * Only for an embedded gateway: with Redis nothing is stored. TOLLGATE_ADMIN_TOKEN in this
 * shell (after the README's `export TOLLGATE_ADMIN_TOKEN=$(npx tollgate admin-token)`, say)
 * does not stop it: the file is what it shows and replaces; the shell's copy is only
 * compared with it, to say when it is stale. What a gateway uses depends on ITS
 * environment, which this command cannot see: both cases are said on stderr.
 */
async function adminToken(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { reset: { type: 'boolean', default: false } } })
  const config = loadConfig()
  if (config.redis !== undefined) {
    throw new Error(
      'with Redis (REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS) the admin token comes only from TOLLGATE_ADMIN_TOKEN, set on every instance',
    )
  }
  const { ensureStoredAdminToken, readStoredAdminToken, resetStoredAdminToken, adminTokenPath } =
    await import('./auth/admin-token.ts')
  const dataDir = resolve(config.store.dataDir)
  const path = adminTokenPath(dataDir)
  const fromEnv = config.secrets.adminToken
  if (values.reset) {
    const token = resetStoredAdminToken(dataDir)
    process.stdout.write(`${token}\n`)
    process.stderr.write(
      `tollgate: a new admin token is in ${path}; a gateway using the stored token stops taking the previous one within a second\n`,
    )
    if (fromEnv !== undefined) {
      process.stderr.write(
        'tollgate: TOLLGATE_ADMIN_TOKEN in this environment still holds the previous token: `export TOLLGATE_ADMIN_TOKEN=$(npx tollgate admin-token)` takes the new one. ' +
          'A gateway started with TOLLGATE_ADMIN_TOKEN set to a token of its own keeps that one.\n',
      )
    }
    return
  }
  if (fromEnv === undefined) {
    process.stdout.write(`${ensureStoredAdminToken(dataDir).token}\n`)
    return
  }
  // With TOLLGATE_ADMIN_TOKEN set here, a missing file is not made: the gateway may well
  // run with that same variable, and a second, unused token would only mislead.
  const stored = readStoredAdminToken(dataDir)
  if (stored === null) {
    throw new Error(
      `no admin token is stored in ${path}: a gateway started with TOLLGATE_ADMIN_TOKEN set uses that and stores none. ` +
        'TOLLGATE_ADMIN_TOKEN is set in this environment; unset it to make and show a stored token',
    )
  }
  process.stdout.write(`${stored}\n`)
  if (stored !== fromEnv) {
    process.stderr.write(
      `tollgate: TOLLGATE_ADMIN_TOKEN in this environment differs from the token stored in ${path} (printed above): ` +
        'a gateway started without TOLLGATE_ADMIN_TOKEN takes the stored one; one started with it set takes that\n',
    )
  }
}

class UsageError extends Error {}

export async function main(argv: string[]): Promise<void> {
  const [command, sub, ...rest] = argv
  switch (command) {
    case 'serve':
      return serve(argv.slice(1))
    case 'keys': {
      // Loaded here so that `serve` does not load the command-line client.
      const { runKeysCommand } = await import('./cli/keys.ts')
      process.exitCode = await runKeysCommand(argv.slice(1), processIo())
      return
    }
    case 'users': {
      const { runUsersCommand } = await import('./cli/users.ts')
      const { readPassword } = await import('./cli/password-input.ts')
      process.exitCode = await runUsersCommand(argv.slice(1), { ...processIo(), readPassword })
      return
    }
    case 'queue': {
      const { runQueueCommand } = await import('./cli/queue.ts')
      process.exitCode = await runQueueCommand(argv.slice(1), processIo())
      return
    }
    case 'backends': {
      const { runBackendsCommand } = await import('./cli/backends.ts')
      process.exitCode = await runBackendsCommand(argv.slice(1), processIo())
      return
    }
    case 'webhooks': {
      const { runWebhooksCommand } = await import('./cli/webhooks.ts')
      process.exitCode = await runWebhooksCommand(argv.slice(1), processIo())
      return
    }
    case 'reload': {
      const { runReloadCommand } = await import('./cli/reload.ts')
      process.exitCode = await runReloadCommand(argv.slice(1), processIo())
      return
    }
    case 'budgets': {
      const { runBudgetsCommand } = await import('./cli/budgets.ts')
      process.exitCode = await runBudgetsCommand(argv.slice(1), processIo())
      return
    }
    case 'rag-mock': {
      const { parseRagMockArgs, runRagMock, RAG_MOCK_USAGE } = await import('./rag/mock/cli.ts')
      if (sub === '--help' || sub === '-h') {
        process.stdout.write(RAG_MOCK_USAGE)
        return
      }
      let options
      try {
        options = parseRagMockArgs(argv.slice(1))
      } catch (err) {
        throw new UsageError(`rag-mock: ${(err as Error).message}`)
      }
      return runRagMock(options)
    }
    case 'admin-token':
      return adminToken(argv.slice(1))
    case 'openapi': {
      if (argv.length > 1) throw new UsageError('openapi takes no arguments')
      // Needs no configuration and no running gateway: the document describes the code.
      const { apiDocument } = await import('./openapi/catalogue.ts')
      // Piped into `head` or a generator that stops reading: that is not an error.
      process.stdout.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'EPIPE') process.exit(0)
      })
      process.stdout.write(`${JSON.stringify(apiDocument(), null, 2)}\n`)
      return
    }
    case 'plans':
      if (sub === 'import') return importPlans(rest)
      throw new UsageError(`unknown plans command: ${sub ?? '(none)'}`)
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE)
      return
    default:
      throw new UsageError(`unknown command: ${command}`)
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError || (err instanceof Error && err.name === 'StartupError')) {
    process.stderr.write(`tollgate: ${err.message}\n`)
    process.exit(2)
  }
  if (err instanceof UsageError) {
    process.stderr.write(`tollgate: ${err.message}\n\n${USAGE}`)
    process.exit(64)
  }
  process.stderr.write(`tollgate: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
