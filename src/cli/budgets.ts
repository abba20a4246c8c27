// `tollgate budgets list|show|set|clear`: spend limits from a terminal, through a running
// gateway's /admin/budgets (docs/budgets.md). Same conventions as `tollgate keys` (URL and
// token from the environment or flags, a table by default, --json for scripts).
import { AdminApiError } from './admin-client.ts'
import {
  ADMIN_OPTIONS,
  adminSession,
  runCommandGroup,
  UsageError,
  type CliIo,
  type ParsedCommand,
} from './subcommands.ts'
import { money, table, text } from './table.ts'

export const BUDGETS_USAGE = `Usage: tollgate budgets <command> [options]

Commands:
  list                       Every budget set on a key, an owner or a tenant, and what is left
  show <key-id>              The budgets a key's calls are charged against (its own or its
                             tier's, its owner's, its tenant's), and what is left of each
  set <scope> <id>           Set a budget: scope is key, owner or tenant
      --amount N (the plans' currency)  --period day|week|month|lifetime
      [--time-zone Europe/Berlin (default: the gateway's budgets.timeZone)]
      [--thresholds 50,80,100 (percentages reported as they are reached)]
  clear <scope> <id>         Remove it (a key falls back to its tier's default, if any)

Options:
  --url URL                  Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN        Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json                     Print the API's JSON instead of a table
`

const OPTIONS = {
  list: ADMIN_OPTIONS,
  show: ADMIN_OPTIONS,
  set: {
    ...ADMIN_OPTIONS,
    amount: { type: 'string' },
    period: { type: 'string' },
    'time-zone': { type: 'string' },
    thresholds: { type: 'string' },
  },
  clear: ADMIN_OPTIONS,
} as const

type Command = keyof typeof OPTIONS

export function runBudgetsCommand(args: readonly string[], io: CliIo): Promise<number> {
  return runCommandGroup({ name: 'budgets', usage: BUDGETS_USAGE, options: OPTIONS, run }, args, io)
}

/** scope and id, the two arguments of set and clear. */
function target(options: ParsedCommand): string {
  const [scope, id, extra] = options.positionals
  if (scope === undefined || id === undefined)
    throw new UsageError('name the budget: <scope> <id> (scope: key, owner, tenant)')
  if (extra !== undefined) throw new UsageError(`unexpected argument: ${extra}`)
  return `/admin/budgets/${encodeURIComponent(scope)}/${encodeURIComponent(id)}`
}

async function run(command: Command, options: ParsedCommand, io: CliIo): Promise<number> {
  const { api, print } = adminSession(options, io)
  switch (command) {
    case 'list': {
      options.none()
      const reply = object(await api('GET', '/admin/budgets'))
      return print(reply, () => budgetsTable(list(reply.data)))
    }
    case 'show': {
      const id = options.sole('name the key: tollgate budgets show <key-id>')
      const reply = object(await api('GET', `/admin/keys/${encodeURIComponent(id)}/usage`))
      return print({ object: 'list', data: reply.budgets }, () => budgetsTable(list(reply.budgets)))
    }
    case 'set': {
      const path = target(options)
      const amount = Number(options.str('amount'))
      if (options.str('amount') === undefined || !Number.isFinite(amount))
        throw new UsageError("--amount is needed: a number in the plans' currency")
      const period = options.str('period')
      if (period === undefined) throw new UsageError('--period is needed: day, week, month or lifetime')
      const zone = options.str('time-zone')
      const thresholds = options.str('thresholds')
      const reply = object(
        await api('PUT', path, {
          amount,
          period,
          ...(zone === undefined ? {} : { time_zone: zone }),
          ...(thresholds === undefined ? {} : { thresholds: thresholds.split(',').map((p) => Number(p.trim())) }),
        }),
      )
      return print(reply, () => budgetsTable([reply]))
    }
    case 'clear': {
      const path = target(options)
      const reply = object(await api('DELETE', path))
      return print(reply, () => `Cleared the budget of ${text(reply.scope)} ${text(reply.id)}.\n`)
    }
  }
}

function budgetsTable(rows: readonly Record<string, unknown>[]): string {
  if (rows.length === 0) return 'No budgets.\n'
  const currency = text(rows[0]?.currency)
  return table(
    ['SCOPE', 'ID', 'PERIOD', 'TIME ZONE', `AMOUNT (${currency})`, 'SPENT', 'HELD', 'LEFT', 'RESETS AT', 'FROM'],
    rows.map((b) => [
      text(b.scope),
      text(b.id),
      text(b.period),
      text(b.time_zone),
      money(b.amount),
      money(b.spent),
      money(b.reserved),
      money(b.remaining),
      b.resets_at === null ? 'never' : text(b.resets_at),
      b.origin === 'plan' ? 'tier default' : 'set',
    ]),
  )
}

function object(value: unknown): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  throw new AdminApiError(200, null, 'the gateway answered with an unexpected body')
}

const list = (value: unknown): Record<string, unknown>[] => (Array.isArray(value) ? value.map(object) : [])
