// `tollgate reload [--all]`: a running gateway reads its configuration file again, through
// its admin API (POST /admin/reload). Alone, the gateway at --url answers (a refused file is
// its error, naming each bad field); with --all, every instance on its Redis reloads and
// each answer is printed, one line per instance, within --wait-ms. Exit 0 when every
// instance runs the new file (or already did), 1 when one refused it or did not answer.
import { AdminApiError, createAdminClient } from './admin-client.ts'
import {
  ADMIN_OPTIONS,
  EXIT_FAILED,
  EXIT_OK,
  EXIT_USAGE,
  parseCommandArgs,
  optionReader,
  adminTarget,
  UsageError,
  type CliIo,
} from './subcommands.ts'
import { table, text } from './table.ts'

export const RELOAD_USAGE = `Usage: tollgate reload [--all] [options]

Reads the configuration file again on a running gateway (as SIGHUP does): plans and tiers,
models and deployments, backends, RAG services and rules. A file that does not validate, or
that changes a setting only a restart applies (ports, store, ...), is refused with each such
field named, and the gateway goes on with the configuration it runs.

Options:
  --all                Every instance on the gateway's Redis reloads, and each answers
  --wait-ms N          With --all: how long to wait for the answers (default 5000)
  --url URL            Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN  Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json               Print the API's JSON
`

const OPTIONS = { ...ADMIN_OPTIONS, all: { type: 'boolean', default: false }, 'wait-ms': { type: 'string' } } as const

const OK_OUTCOMES = new Set(['applied', 'unchanged'])

export async function runReloadCommand(args: readonly string[], io: CliIo): Promise<number> {
  try {
    const { values, positionals } = parseCommandArgs(args, OPTIONS)
    const options = optionReader(values)
    if (options.flag('help')) {
      io.stdout(RELOAD_USAGE)
      return EXIT_OK
    }
    if (positionals[0] !== undefined) throw new UsageError(`unexpected argument: ${positionals[0]}`)
    const waitText = options.str('wait-ms')
    if (waitText !== undefined && !/^\d{3,5}$/.test(waitText))
      throw new UsageError('--wait-ms must be a number of milliseconds, 100 to 60000')
    const waitMs = waitText === undefined ? 5000 : Number(waitText)
    const { url, token } = adminTarget(options, io)
    const api = createAdminClient({ url, token, timeoutMs: waitMs + 30_000, ...(io.fetch ? { fetch: io.fetch } : {}) })
    const all = options.flag('all')
    const reply = record(await api('POST', '/admin/reload', all ? { all: true, wait_ms: waitMs } : {}))
    if (options.flag('json')) io.stdout(`${JSON.stringify(reply, null, 2)}\n`)
    if (!all) {
      if (!options.flag('json'))
        io.stdout(`${text(reply.outcome)}: ${text(reply.instance)} runs sha256 ${text(reply.hash)}${changes(reply)}\n`)
      return EXIT_OK
    }
    const answers = Array.isArray(reply.data) ? reply.data.map(record) : []
    const asked = typeof reply.asked === 'number' ? reply.asked : null
    if (!options.flag('json')) {
      io.stdout(
        table(
          ['INSTANCE', 'HOST', 'PID', 'OUTCOME', 'SHA256 IN FORCE', 'PROBLEMS'],
          answers.map((a) => [
            text(a.instance),
            text(a.host),
            text(a.pid),
            text(a.outcome),
            text(a.hash),
            Array.isArray(a.problems) && a.problems.length > 0 ? a.problems.map(String).join('; ') : '-',
          ]),
        ),
      )
      const missing = asked === null ? null : asked - answers.length
      io.stdout(
        `${answers.length} answered${asked === null ? '' : ` of ${asked} reached`} within ${waitMs} ms` +
          `${missing !== null && missing > 0 ? `: ${missing} did not answer` : ''}\n`,
      )
    }
    const refused = answers.some((a) => !OK_OUTCOMES.has(String(a.outcome)))
    const silent = asked !== null && answers.length < asked
    return refused || silent || answers.length === 0 ? EXIT_FAILED : EXIT_OK
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`tollgate reload: ${err.message}\n${err.showUsage ? `\n${RELOAD_USAGE}` : ''}`)
      return EXIT_USAGE
    }
    if (err instanceof AdminApiError) {
      const what = err.status === 0 ? err.message : `${err.status}${err.code ? ` ${err.code}` : ''}: ${err.message}`
      io.stderr(`tollgate reload: ${what}\n`)
      return EXIT_FAILED
    }
    throw err
  }
}

function record(value: unknown): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  throw new AdminApiError(200, null, 'the gateway answered with an unexpected body')
}

function changes(reply: Record<string, unknown>): string {
  const changed = Array.isArray(reply.changed) ? reply.changed.map(String) : []
  return changed.length > 0 ? ` (changed: ${changed.join(', ')})` : ''
}
