// `tollgate keys create|list|show|update|rotate|revoke|usage`: the key portal from a
// terminal, through a running gateway's admin API. Tables by default, --json for scripts.
// The gateway URL and admin token come from --url / --admin-token, TOLLGATE_URL /
// TOLLGATE_ADMIN_TOKEN (better than flags, which show up in `ps` and shell history), or else
// PORT and the stored token, as the gateway would read them (gateway-target.ts).
import type { ParseArgsConfig } from 'node:util'
import { DEFAULT_CURRENCY } from '../keys/money.ts'
import { AdminApiError } from './admin-client.ts'
import {
  ADMIN_OPTIONS,
  adminSession,
  runCommandGroup,
  setupError,
  UsageError,
  type CliIo,
  type ParsedCommand,
} from './subcommands.ts'
import { fields, integer, money, table, text } from './table.ts'
import { mergeUsageReplies, usageWindows, type UsageWindow } from './usage-windows.ts'

export { EXIT_FAILED, EXIT_OK, EXIT_USAGE, type CliIo } from './subcommands.ts'

export const KEYS_USAGE = `Usage: tollgate keys <command> [options]

Commands:
  create                     Create a key; prints its secret once
      --name N  --owner O  --tier T  --model M (repeat)  --endpoint E (repeat)
      --expires-at ISO-TIME | --expires-in 90d (unit: s, m, h, d, w)  --limits '{"*": {"rpm": 60}}'
  list                       List keys   [--owner O] [--tier T] [--status active|revoked|expired]
  show <id>                  One key
  update <id>                Change a key: --name, --tier, --model, --endpoint, --expires-at,
                             --expires-in, --limits; --all-models, --all-endpoints,
                             --no-expiry, --default-tier, --no-limits reset
  rotate <id> [--grace 1h]   New secret; the old one works for the grace (default: not at all;
                             unit: s, m, h, d, w)
  revoke <id>                Revoke a key on every instance
  usage [<id>]               Usage per model and day for a key, or across keys:
      --from YYYY-MM-DD --to YYYY-MM-DD (default: today; a range over 366 days is asked
      for in windows and added up)  --group-by key|owner|tier|model  --daily

Options:
  --url URL                  Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN        Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json                     Print the API's JSON instead of tables
`

const SCOPE = {
  name: { type: 'string' },
  tier: { type: 'string' },
  model: { type: 'string', multiple: true },
  endpoint: { type: 'string', multiple: true },
  'expires-at': { type: 'string' },
  'expires-in': { type: 'string' },
  limits: { type: 'string' },
} as const satisfies ParseArgsConfig['options']

const OPTIONS = {
  create: { ...ADMIN_OPTIONS, ...SCOPE, owner: { type: 'string' } },
  list: { ...ADMIN_OPTIONS, owner: { type: 'string' }, tier: { type: 'string' }, status: { type: 'string' } },
  show: ADMIN_OPTIONS,
  update: {
    ...ADMIN_OPTIONS,
    ...SCOPE,
    'all-models': { type: 'boolean', default: false },
    'all-endpoints': { type: 'boolean', default: false },
    'no-expiry': { type: 'boolean', default: false },
    'default-tier': { type: 'boolean', default: false },
    'no-limits': { type: 'boolean', default: false },
  },
  rotate: { ...ADMIN_OPTIONS, grace: { type: 'string' } },
  revoke: ADMIN_OPTIONS,
  usage: {
    ...ADMIN_OPTIONS,
    from: { type: 'string' },
    to: { type: 'string' },
    'group-by': { type: 'string' },
    daily: { type: 'boolean', default: false },
  },
} as const satisfies Record<string, ParseArgsConfig['options']>

type Command = keyof typeof OPTIONS

export function runKeysCommand(args: readonly string[], io: CliIo): Promise<number> {
  return runCommandGroup({ name: 'keys', usage: KEYS_USAGE, options: OPTIONS, run }, args, io)
}

async function run(command: Command, options: ParsedCommand, io: CliIo): Promise<number> {
  const { str, list, flag, positionals, none: noPositionals } = options
  const id = (): string => options.sole(`keys ${command} needs a key id`)

  const { api, url, print } = adminSession(options, io)
  if (!/^https?:\/\/[^\s]+$/.test(url)) throw setupError(`not an http(s) URL: ${url}`)

  switch (command) {
    case 'create': {
      noPositionals()
      const body = {
        ...scopeBody(str, list),
        ...(str('owner') === undefined ? {} : { owner: str('owner') }),
      }
      const created = asObject(await api('POST', '/admin/keys', body))
      echoExpiry(str('expires-in'), created, io)
      return print(created, () => showKey(created) + secretNotice(created))
    }
    case 'list': {
      noPositionals()
      const query = new URLSearchParams()
      for (const name of ['owner', 'tier', 'status']) {
        const v = str(name)
        if (v !== undefined) query.set(name, v)
      }
      const reply = asObject(await api('GET', `/admin/keys${query.size > 0 ? `?${query}` : ''}`))
      const data = asArray(reply.data).map(asObject)
      return print(reply, () =>
        data.length === 0
          ? 'No keys.\n'
          : table(
              ['ID', 'PREFIX', 'NAME', 'OWNER', 'TIER', 'STATUS', 'EXPIRES', 'CREATED'],
              data.map((k) => [
                text(k.id),
                `${text(k.prefix)}…`,
                text(k.name),
                text(k.owner),
                text(k.tier),
                text(k.status),
                text(k.expires_at),
                text(k.created_at),
              ]),
            ),
      )
    }
    case 'show': {
      const key = asObject(await api('GET', `/admin/keys/${encodeURIComponent(id())}`))
      return print(key, () => showKey(key))
    }
    case 'update': {
      const keyId = id()
      const body: Record<string, unknown> = { ...scopeBody(str, list) }
      const resets: Array<[string, string, string]> = [
        ['all-models', 'models', 'model'],
        ['all-endpoints', 'endpoints', 'endpoint'],
        ['no-expiry', 'expires_at', 'expires-at'],
        ['default-tier', 'tier', 'tier'],
        ['no-limits', 'limits', 'limits'],
      ]
      for (const [reset, field, conflicting] of resets) {
        if (!flag(reset)) continue
        if (field in body) throw new UsageError(`--${reset} and --${conflicting} contradict each other`)
        body[field] = null
      }
      if (Object.keys(body).length === 0) throw new UsageError('keys update needs something to change')
      const key = asObject(await api('PATCH', `/admin/keys/${encodeURIComponent(keyId)}`, body))
      echoExpiry(str('expires-in'), key, io)
      return print(key, () => showKey(key))
    }
    case 'rotate': {
      const keyId = id()
      const grace = str('grace')
      const body = grace === undefined ? {} : { grace_seconds: durationSeconds(grace, '--grace') }
      const rotated = asObject(await api('POST', `/admin/keys/${encodeURIComponent(keyId)}/rotate`, body))
      return print(rotated, () => {
        const until = rotated.rotation_grace_until
        const old =
          typeof until === 'string'
            ? `The previous secret keeps working until ${until}.\n`
            : 'The previous secret no longer works.\n'
        return showKey(rotated) + secretNotice(rotated) + old
      })
    }
    case 'revoke': {
      const key = asObject(await api('DELETE', `/admin/keys/${encodeURIComponent(id())}`))
      return print(key, () => `Revoked ${text(key.id)} (${text(key.prefix)}…) at ${text(key.revoked_at)}.\n`)
    }
    case 'usage': {
      const [keyId, ...extra] = positionals
      if (extra.length > 0) throw new UsageError(`unexpected argument: ${extra[0]}`)
      // A range longer than one query may cover is asked for in windows, and added up.
      const windows = usageWindows(str('from'), str('to'), new Date())
      const rangeQuery = (w: UsageWindow): URLSearchParams => {
        const query = new URLSearchParams()
        if (w.from !== undefined) query.set('from', w.from)
        if (w.to !== undefined) query.set('to', w.to)
        return query
      }
      const ask = async (path: (query: URLSearchParams) => string): Promise<Record<string, unknown>[]> => {
        const replies: Record<string, unknown>[] = []
        for (const w of windows) replies.push(asObject(await api('GET', path(rangeQuery(w)))))
        return replies
      }
      if (keyId !== undefined) {
        if (str('group-by') !== undefined || flag('daily'))
          throw new UsageError('--group-by and --daily apply to usage across keys (no key id)')
        const reply = mergeUsageReplies(
          await ask((query) => `/admin/keys/${encodeURIComponent(keyId)}/usage${query.size > 0 ? `?${query}` : ''}`),
          null,
          true,
        )
        return print(
          reply,
          () =>
            `Usage of ${text(reply.key_id)}, ${text(reply.from)} to ${text(reply.to)}\n` +
            usageTable(['DAY', 'MODEL'], ['day', 'model'], reply),
        )
      }
      const group = str('group-by') ?? 'key'
      const field = group === 'key' ? 'key_id' : group
      const reply = mergeUsageReplies(
        await ask((query) => {
          query.set('group_by', group)
          if (flag('daily')) query.set('granularity', 'day')
          return `/admin/usage?${query}`
        }),
        field,
        flag('daily'),
      )
      const labels = flag('daily') ? ['DAY', group.toUpperCase()] : [group.toUpperCase()]
      const columns = flag('daily') ? ['day', field] : [field]
      return print(
        reply,
        () => `Usage by ${group}, ${text(reply.from)} to ${text(reply.to)}\n` + usageTable(labels, columns, reply),
      )
    }
  }
}

function scopeBody(
  str: (flag: string) => string | undefined,
  list: (flag: string) => string[] | undefined,
): Record<string, unknown> {
  const body: Record<string, unknown> = {}
  const name = str('name')
  if (name !== undefined) body.name = name
  const tier = str('tier')
  if (tier !== undefined) body.tier = tier
  const models = list('model')
  if (models !== undefined) body.models = models.flatMap(splitList)
  const endpoints = list('endpoint')
  if (endpoints !== undefined) body.endpoints = endpoints.flatMap(splitList)
  const at = str('expires-at')
  const inside = str('expires-in')
  if (at !== undefined && inside !== undefined) throw new UsageError('give --expires-at or --expires-in, not both')
  if (at !== undefined) body.expires_at = at
  if (inside !== undefined)
    body.expires_at = new Date(Date.now() + durationSeconds(inside, '--expires-in') * 1000).toISOString()
  const limits = str('limits')
  if (limits !== undefined) {
    try {
      body.limits = JSON.parse(limits)
    } catch {
      throw new UsageError('--limits must be JSON, e.g. \'{"*": {"rpm": 60}}\'')
    }
  }
  return body
}

/** "a,b" and "a" "b" both work for repeatable lists. */
function splitList(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0)
}

const UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }

/**
 * "45s", "30m", "12h", "90d", "2w" → seconds. A bare number is refused: `--expires-in 90`
 * was read as 90 seconds by people who meant 90 days, and a key that dies at once is
 * found out only when it fails.
 */
export function durationSeconds(value: string, what: string): number {
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed))
    throw new UsageError(`${what} ${value}: say the unit: ${trimmed}d (days), ${trimmed}h, ${trimmed}m or ${trimmed}s`)
  const match = /^(\d+)([smhdw])$/.exec(trimmed)
  if (match === null) throw new UsageError(`${what}: not a duration like 45s, 30m, 12h, 90d or 2w: ${value}`)
  return Number(match[1]) * (UNITS[match[2] ?? 's'] ?? 1)
}

const UNIT_NAMES: Record<string, string> = { s: 'second', m: 'minute', h: 'hour', d: 'day', w: 'week' }

/** What --expires-in came to, said on stderr (so --json output stays the API's JSON). */
function echoExpiry(expiresIn: string | undefined, key: Record<string, unknown>, io: CliIo): void {
  if (expiresIn === undefined) return
  const match = /^(\d+)([smhdw])$/.exec(expiresIn.trim())
  const span =
    match === null ? expiresIn : `${match[1]} ${UNIT_NAMES[match[2] ?? 's'] ?? ''}${match[1] === '1' ? '' : 's'}`
  io.stderr(`--expires-in ${expiresIn}: the key expires at ${text(key.expires_at)} (${span} from now)\n`)
}

function asObject(value: unknown): Record<string, unknown> {
  if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  throw new AdminApiError(200, null, 'the gateway answered with an unexpected body')
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : []
}

function showKey(key: Record<string, unknown>): string {
  return fields([
    ['ID', text(key.id)],
    ['Prefix', `${text(key.prefix)}…`],
    ['Name', text(key.name)],
    ['Owner', text(key.owner)],
    ['Tier', text(key.tier)],
    ['Status', text(key.status)],
    ['Models', key.models === null ? 'all' : text(key.models)],
    ['Endpoints', key.endpoints === null ? 'all' : text(key.endpoints)],
    ['Limits', key.limits === null ? 'tier defaults' : text(key.limits)],
    ['Expires', key.expires_at === null ? 'never' : text(key.expires_at)],
    ['Created', text(key.created_at)],
    ['Updated', text(key.updated_at)],
    ...(key.revoked_at === null || key.revoked_at === undefined ? [] : [['Revoked', text(key.revoked_at)] as const]),
    ...(typeof key.rotation_grace_until === 'string' ? [['Old secret until', key.rotation_grace_until] as const] : []),
  ])
}

function secretNotice(key: Record<string, unknown>): string {
  return `\nSecret (shown once; store it now, it cannot be shown again):\n\n  ${text(key.key)}\n\n`
}

function usageTable(labels: readonly string[], columns: readonly string[], reply: Record<string, unknown>): string {
  const rows = asArray(reply.data)
    .map(asObject)
    .map((r) => [
      ...columns.map((c) => text(r[c])),
      integer(r.requests),
      integer(r.input_tokens),
      integer(r.output_tokens),
      money(r.cost),
      ...cacheCells(r),
    ])
  if (rows.length === 0) return 'No usage in this period.\n'
  const t = asObject(reply.totals)
  rows.push([
    ...columns.map((_, i) => (i === 0 ? 'TOTAL' : '')),
    integer(t.requests),
    integer(t.input_tokens),
    integer(t.output_tokens),
    money(t.cost),
    ...cacheCells(t),
  ])
  // A gateway from before `currency` was in the reply priced in the catalogue's euros too.
  const currency = typeof reply.currency === 'string' ? text(reply.currency) : DEFAULT_CURRENCY
  return table(
    [
      ...labels,
      'REQUESTS',
      'INPUT TOKENS',
      'OUTPUT TOKENS',
      `COST (${currency})`,
      // As the portal and the CSV have them: after the cost, parts of the input and of the cost.
      'CACHE READS',
      'CACHE WRITES',
      `CACHE READ COST (${currency})`,
      `CACHE WRITE COST (${currency})`,
    ],
    rows,
  )
}

/** The prompt cache's parts of a row's input and cost ('-' from a gateway that does not report them). */
function cacheCells(r: Record<string, unknown>): string[] {
  return [
    integer(r.cache_read_tokens),
    integer(r.cache_write_tokens),
    money(r.cache_read_cost),
    money(r.cache_write_cost),
  ]
}
