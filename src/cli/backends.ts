// `tollgate backends list`: each model's deployments and their capacity from a terminal,
// through a running gateway's GET /admin/backends. Same conventions as `tollgate queue`
// (URL and token from the environment or flags, a table by default, --json for scripts).
import { AdminApiError } from './admin-client.ts'
import { ADMIN_OPTIONS, adminSession, runCommandGroup, type CliIo, type ParsedCommand } from './subcommands.ts'
import { integer, table, text } from './table.ts'

export const BACKENDS_USAGE = `Usage: tollgate backends <command> [options]

Commands:
  list                 Each model's deployments: declared rpm/tpm/maxConcurrent, in flight,
                       what is left, and cooldowns (as the shared store sees them now)

Options:
  --url URL            Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN  Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json               Print the API's JSON instead of a table
`

const OPTIONS = { list: ADMIN_OPTIONS }

type Command = keyof typeof OPTIONS

export function runBackendsCommand(args: readonly string[], io: CliIo): Promise<number> {
  return runCommandGroup({ name: 'backends', usage: BACKENDS_USAGE, options: OPTIONS, run }, args, io)
}

async function run(command: Command, options: ParsedCommand, io: CliIo): Promise<number> {
  const { api, print } = adminSession(options, io)
  options.none()
  switch (command) {
    case 'list': {
      const reply = object(await api('GET', '/admin/backends'))
      const rows = list(reply.data).flatMap((m) =>
        list(m.deployments).map((d) => {
          const limits = object(d.limits ?? {})
          const state = d.state === null || d.state === undefined ? null : object(d.state)
          return [
            text(m.name),
            text(d.id),
            limit(limits.rpm),
            limit(limits.tpm),
            limit(limits.max_concurrent),
            state === null ? '?' : integer(state.in_flight),
            state === null ? '?' : limit(state.remaining_requests),
            state === null ? '?' : limit(state.remaining_tokens),
            state === null ? '?' : state.cooling_down === true ? `until ${text(state.cooling_until)}` : '-',
            circuitOf(d.circuit),
          ]
        }),
      )
      const note = reply.state_available === false ? 'The capacity store did not answer: state unknown (?).\n' : ''
      return print(
        reply,
        () =>
          table(
            [
              'MODEL',
              'DEPLOYMENT',
              'RPM',
              'TPM',
              'MAX CONC.',
              'IN FLIGHT',
              'REQ. LEFT',
              'TOKENS LEFT',
              'COOLING DOWN',
              'CIRCUIT',
            ],
            rows,
          ) + note,
      )
    }
  }
}

function object(value: unknown): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  throw new AdminApiError(200, null, 'the gateway answered with an unexpected body')
}

/** The backend's circuit on the instance that answered: `open until …`, `closed`, or `-` when not shown. */
function circuitOf(value: unknown): string {
  if (value === null || value === undefined) return '-'
  const c = object(value)
  return c.open === true ? `open until ${text(c.open_until)}` : 'closed'
}

const list = (value: unknown): Record<string, unknown>[] => (Array.isArray(value) ? value.map(object) : [])

/** A limit or a count that may be unknown: `-` for none. */
const limit = (n: unknown): string => (typeof n === 'number' ? integer(n) : '-')
