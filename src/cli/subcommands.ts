// What every `tollgate <group> <command>` shares: its I/O, its exit codes, its usage
// errors, the dispatch from a command name to the command, with the admin API's refusals
// turned into one line a person can act on, and the way each group reaches that API (the
// gateway URL and admin token from flags or the environment, tables or --json).
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { AdminApiError, createAdminClient, type AdminClient } from './admin-client.ts'
import { gatewayTarget } from './gateway-target.ts'

export interface CliIo {
  readonly env: Readonly<Record<string, string | undefined>>
  readonly stdout: (text: string) => void
  readonly stderr: (text: string) => void
  readonly fetch?: typeof fetch
}

/** Exit codes: 0 done, 1 the gateway refused or could not be reached, 64 bad usage. */
export const EXIT_OK = 0
export const EXIT_FAILED = 1
export const EXIT_USAGE = 64

export class UsageError extends Error {
  /** Whether the help text helps: not for a missing token, say. */
  showUsage = true
}

export interface CommandGroup<C extends string, Io extends CliIo> {
  /** As typed: `keys`, `users`, `queue`. */
  readonly name: string
  readonly usage: string
  /** Each command's options (strict), by its name: the group's commands are these names. */
  readonly options: Readonly<Record<C, ParseArgsConfig['options']>>
  readonly run: (command: C, parsed: ParsedCommand, io: Io) => Promise<number>
}

/** A command's arguments once its options parsed and --help was not asked for. */
export interface ParsedCommand extends OptionReader {
  readonly positionals: readonly string[]
  /** The one argument the command takes; `missing` is the error when there is none, `note` follows an extra one's. */
  readonly sole: (missing: string, note?: string) => string
  /** For a command that takes no argument: refuses one. */
  readonly none: () => void
}

function positionalReader(positionals: readonly string[]): Pick<ParsedCommand, 'positionals' | 'sole' | 'none'> {
  const unexpected = (extra: string, note?: string): UsageError =>
    new UsageError(`unexpected argument: ${extra}${note === undefined ? '' : ` (${note})`}`)
  return {
    positionals,
    sole: (missing, note) => {
      const [first, ...extra] = positionals
      if (first === undefined) throw new UsageError(missing)
      if (extra[0] !== undefined) throw unexpected(extra[0], note)
      return first
    },
    none: () => {
      if (positionals[0] !== undefined) throw unexpected(positionals[0])
    },
  }
}

/** Runs `tollgate <group> <args…>`; resolves with the exit code. */
export async function runCommandGroup<C extends string, Io extends CliIo>(
  group: CommandGroup<C, Io>,
  args: readonly string[],
  io: Io,
): Promise<number> {
  const [name, ...rest] = args
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.stdout(group.usage)
    return name === undefined ? EXIT_USAGE : EXIT_OK
  }
  const isCommand = (n: string): n is C => Object.hasOwn(group.options, n)
  try {
    if (!isCommand(name)) throw new UsageError(`unknown ${group.name} command: ${name}`)
    const { values, positionals } = parseCommandArgs(rest, group.options[name])
    if (values.help === true) {
      io.stdout(group.usage)
      return EXIT_OK
    }
    return await group.run(name, { ...positionalReader(positionals), ...optionReader(values) }, io)
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`tollgate ${group.name}: ${err.message}\n${err.showUsage ? `\n${group.usage}` : ''}`)
      return EXIT_USAGE
    }
    if (err instanceof AdminApiError) {
      const what = err.status === 0 ? err.message : `${err.status}${err.code ? ` ${err.code}` : ''}: ${err.message}`
      io.stderr(`tollgate ${group.name} ${name}: ${what}\n`)
      return EXIT_FAILED
    }
    throw err
  }
}

export type OptionValues = Record<string, string | boolean | string[] | undefined>

/** A command's options and arguments (strict; a bad option is a UsageError). */
export function parseCommandArgs(
  args: readonly string[],
  options: ParseArgsConfig['options'],
): { values: OptionValues; positionals: string[] } {
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true })
    return { values: parsed.values, positionals: parsed.positionals }
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}

/** What a command's options say, read by name (parseArgs types them by the command's own table). */
export interface OptionReader {
  readonly str: (flag: string) => string | undefined
  readonly list: (flag: string) => string[] | undefined
  readonly flag: (name: string) => boolean
}

export function optionReader(values: OptionValues): OptionReader {
  return {
    str: (flag) => {
      const v = values[flag]
      return typeof v === 'string' ? v : undefined
    },
    list: (flag) => {
      const v = values[flag]
      return Array.isArray(v) ? v : undefined
    },
    flag: (name) => values[name] === true,
  }
}

/** The options every command of a group takes: where the gateway is, its admin token, --json, --help. */
export const ADMIN_OPTIONS = {
  url: { type: 'string' },
  'admin-token': { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies ParseArgsConfig['options']

export interface AdminSession {
  readonly api: AdminClient
  /** The gateway URL the client was made for. */
  readonly url: string
  /** Prints the API's JSON with --json, else what `human` writes; returns EXIT_OK. */
  readonly print: (value: unknown, human: () => string) => number
}

/**
 * The admin API as ADMIN_OPTIONS or the environment name it (gateway-target.ts). No token is a
 * UsageError without the help text: the help would not tell the person where to find one.
 */
export function adminSession(options: OptionReader, io: CliIo): AdminSession {
  const { url, token } = adminTarget(options, io)
  const json = options.flag('json')
  return {
    api: createAdminClient({ url, token, ...(io.fetch ? { fetch: io.fetch } : {}) }),
    url,
    print: (value, human) => {
      io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : human())
      return EXIT_OK
    },
  }
}

/** The gateway URL and admin token for ADMIN_OPTIONS, the same for every command; no token throws. */
export function adminTarget(options: OptionReader, io: CliIo): { url: string; token: string } {
  const flags = { url: options.str('url'), token: options.str('admin-token') }
  const target = gatewayTarget(flags, io.env)
  if (!target.token) throw setupError(target.missing)
  return { url: target.url, token: target.token }
}

/** A usage error that the help text would not help with (a missing token, a bad URL). */
export function setupError(message: string): UsageError {
  const error = new UsageError(message)
  error.showUsage = false
  return error
}
