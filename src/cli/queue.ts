// `tollgate queue list|show|cancel`: the queue from a terminal, through a running
// gateway's admin API. Same conventions as `tollgate keys` (URL and token from the
// environment or flags, tables by default, --json for scripts, the same exit codes).
import { AdminApiError } from './admin-client.ts'
import { ADMIN_OPTIONS, adminSession, runCommandGroup, type CliIo, type ParsedCommand } from './subcommands.ts'
import { fields, integer, table, text } from './table.ts'

export const QUEUE_USAGE = `Usage: tollgate queue <command> [options]

Commands:
  list                 Lines with calls waiting: depth and oldest wait per key and model
  show <id>            One stored (asynchronous) request, whoever owns it
  cancel <id>          Cancel a stored request: a queued one never runs, a running one is aborted

Options:
  --url URL            Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN  Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json               Print the API's JSON instead of tables
`

const OPTIONS = { list: ADMIN_OPTIONS, show: ADMIN_OPTIONS, cancel: ADMIN_OPTIONS }

type Command = keyof typeof OPTIONS

export function runQueueCommand(args: readonly string[], io: CliIo): Promise<number> {
  return runCommandGroup({ name: 'queue', usage: QUEUE_USAGE, options: OPTIONS, run }, args, io)
}

async function run(command: Command, options: ParsedCommand, io: CliIo): Promise<number> {
  const { api, print } = adminSession(options, io)
  const id = (): string => encodeURIComponent(options.sole(`queue ${command} needs a request id`))

  switch (command) {
    case 'list': {
      options.none()
      const reply = object(await api('GET', '/admin/queue'))
      const lines = (Array.isArray(reply.data) ? reply.data : []).map(object)
      return print(
        reply,
        () =>
          (lines.length === 0
            ? 'Nothing is waiting.\n'
            : table(
                ['KEY', 'MODEL', 'WAITING', 'OLDEST WAIT', 'SINCE'],
                lines.map((l) => [
                  text(l.key_id),
                  text(l.model),
                  integer(l.depth),
                  wait(l.oldest_wait_ms),
                  text(l.oldest_joined_at),
                ]),
              )) + `Worker on this instance: ${text(reply.worker)}\n`,
      )
    }
    case 'show': {
      const request = object(await api('GET', `/admin/queue/requests/${id()}`))
      return print(request, () => showRequest(request))
    }
    case 'cancel': {
      const request = object(await api('DELETE', `/admin/queue/requests/${id()}`))
      return print(request, () => showRequest(request))
    }
  }
}

function object(value: unknown): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  throw new AdminApiError(200, null, 'the gateway answered with an unexpected body')
}

function wait(ms: unknown): string {
  return typeof ms === 'number' ? `${(ms / 1000).toFixed(1)} s` : '-'
}

const when = (seconds: unknown): string => (typeof seconds === 'number' ? new Date(seconds * 1000).toISOString() : '-')

function showRequest(r: Record<string, unknown>): string {
  const response =
    typeof r.response === 'object' && r.response !== null ? (r.response as Record<string, unknown>) : null
  const usage =
    typeof response?.usage === 'object' && response.usage !== null ? (response.usage as Record<string, unknown>) : null
  return fields([
    ['ID', text(r.id)],
    ['Status', text(r.status)],
    ['Owner', text(r.owner)],
    ['Key', text(r.key_id)],
    ['Endpoint', text(r.endpoint)],
    ['Model', text(r.model)],
    ...(r.position === undefined ? [] : [['Position', text(r.position)] as const]),
    ['Attempts', text(r.attempts)],
    ['Created', when(r.created_at)],
    ['Started', when(r.started_at)],
    ['Finished', when(r.completed_at)],
    ['Expires', when(r.expires_at)],
    ...(response === null
      ? []
      : [
          ['Upstream status', text(response.status_code)] as const,
          [
            'Tokens',
            usage === null ? '-' : `${integer(usage.input_tokens)} in, ${integer(usage.output_tokens)} out`,
          ] as const,
        ]),
  ])
}
