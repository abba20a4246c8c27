// `tollgate users add|list|show|update|remove`: RAG gateway accounts through a running
// gateway's admin API (/admin/users). A password is read from stdin or a no-echo prompt,
// never taken from the command line.
import type { ParseArgsConfig } from 'node:util'
import {
  ADMIN_OPTIONS,
  adminSession,
  runCommandGroup,
  UsageError,
  type CliIo,
  type ParsedCommand,
} from './subcommands.ts'
import { fields, table, text } from './table.ts'

export const USERS_USAGE = `Usage: tollgate users <command> [options]

Commands:
  add <username>             Create a user; the password is read from stdin (first line) or a prompt
      --role R (repeat)  --group G (repeat)  --tenant T  --disabled
  list                       List users
  show <username>            One user
  update <username>          Change a user: --role, --group (replace the lists), --no-roles,
                             --no-groups, --tenant T, --disable, --enable,
                             --password (read a new one from stdin or a prompt; ends its sessions)
  remove <username>          Delete a user; its tokens stop working

Options:
  --url URL                  Gateway URL (env TOLLGATE_URL, default HOST and PORT as the gateway reads them)
  --admin-token TOKEN        Admin token (env TOLLGATE_ADMIN_TOKEN, default the one stored in TOLLGATE_DATA_DIR)
  --json                     Print the API's JSON instead of tables
`

export interface UsersCliIo extends CliIo {
  /** Reads a password without echoing it (src/cli/password-input.ts). */
  readonly readPassword: (prompt: string) => Promise<string>
}

const LISTS = {
  role: { type: 'string', multiple: true },
  group: { type: 'string', multiple: true },
  tenant: { type: 'string' },
} as const

const OPTIONS = {
  add: { ...ADMIN_OPTIONS, ...LISTS, disabled: { type: 'boolean', default: false } },
  list: ADMIN_OPTIONS,
  show: ADMIN_OPTIONS,
  update: {
    ...ADMIN_OPTIONS,
    ...LISTS,
    'no-roles': { type: 'boolean', default: false },
    'no-groups': { type: 'boolean', default: false },
    disable: { type: 'boolean', default: false },
    enable: { type: 'boolean', default: false },
    password: { type: 'boolean', default: false },
  },
  remove: ADMIN_OPTIONS,
} as const satisfies Record<string, ParseArgsConfig['options']>

type Command = keyof typeof OPTIONS

export function runUsersCommand(args: readonly string[], io: UsersCliIo): Promise<number> {
  return runCommandGroup({ name: 'users', usage: USERS_USAGE, options: OPTIONS, run }, args, io)
}

async function run(command: Command, options: ParsedCommand, io: UsersCliIo): Promise<number> {
  const { str, list, flag } = options
  const username = (): string =>
    options.sole(
      `users ${command} needs a username`,
      'a password is never an argument: it is read from stdin or a prompt',
    )
  const { api, print } = adminSession(options, io)
  const path = (name: string): string => `/admin/users/${encodeURIComponent(name)}`
  const newPassword = async (): Promise<string> => {
    const password = await io.readPassword('Password: ')
    if (password === '') throw new UsageError('no password given (on stdin or at the prompt)')
    return password
  }
  const body = (): Record<string, unknown> => ({
    ...(list('role') === undefined ? {} : { roles: list('role') }),
    ...(list('group') === undefined ? {} : { groups: list('group') }),
    ...(str('tenant') === undefined ? {} : { tenant: str('tenant') }),
  })

  switch (command) {
    case 'add': {
      const name = username()
      const user = asObject(
        await api('POST', '/admin/users', {
          username: name,
          password: await newPassword(),
          ...body(),
          ...(flag('disabled') ? { disabled: true } : {}),
        }),
      )
      return print(user, () => showUser(user))
    }
    case 'list': {
      options.none()
      const reply = asObject(await api('GET', '/admin/users'))
      const data = (Array.isArray(reply.data) ? reply.data : []).map(asObject)
      return print(reply, () =>
        data.length === 0
          ? 'No users.\n'
          : table(
              ['USERNAME', 'ID', 'TENANT', 'ROLES', 'GROUPS', 'DISABLED', 'CREATED'],
              data.map((u) => [
                text(u.username),
                text(u.id),
                text(u.tenant),
                joined(u.roles),
                joined(u.groups),
                text(u.disabled),
                text(u.created_at),
              ]),
            ),
      )
    }
    case 'show': {
      const user = asObject(await api('GET', path(username())))
      return print(user, () => showUser(user))
    }
    case 'update': {
      const name = username()
      const changes = body()
      if (flag('no-roles')) {
        if ('roles' in changes) throw new UsageError('--no-roles and --role contradict each other')
        changes.roles = []
      }
      if (flag('no-groups')) {
        if ('groups' in changes) throw new UsageError('--no-groups and --group contradict each other')
        changes.groups = []
      }
      if (flag('disable') && flag('enable')) throw new UsageError('--disable and --enable contradict each other')
      if (flag('disable') || flag('enable')) changes.disabled = flag('disable')
      if (flag('password')) changes.password = await newPassword()
      if (Object.keys(changes).length === 0) throw new UsageError('users update needs something to change')
      const user = asObject(await api('PATCH', path(name), changes))
      return print(user, () => showUser(user))
    }
    case 'remove': {
      const user = asObject(await api('DELETE', path(username())))
      return print(user, () => `Deleted user ${text(user.username)} (${text(user.id)}).\n`)
    }
  }
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {}
}

const joined = (value: unknown): string => (Array.isArray(value) && value.length > 0 ? value.map(text).join(',') : '-')

function showUser(user: Record<string, unknown>): string {
  return fields([
    ['Username', text(user.username)],
    ['ID', text(user.id)],
    ['Tenant', text(user.tenant)],
    ['Roles', joined(user.roles)],
    ['Groups', joined(user.groups)],
    ['Disabled', text(user.disabled)],
    ['Created', text(user.created_at)],
    ['Updated', text(user.updated_at)],
  ])
}
