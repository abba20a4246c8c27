// What every `tollgate <group> <command>` shares: its I/O, its exit codes, its usage
// errors, and the dispatch from a command name to the command, with the admin API's
// refusals turned into one line a person can act on.
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { AdminApiError } from './admin-client.ts'

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
  readonly isCommand: (name: string) => name is C
  readonly run: (command: C, args: readonly string[], io: Io) => Promise<number>
}

/** Runs `tollgate <group> <args…>`; resolves with the exit code. */
export async function runCommandGroup<C extends string, Io extends CliIo>(group: CommandGroup<C, Io>, args: readonly string[], io: Io): Promise<number> {
  const [name, ...rest] = args
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.stdout(group.usage)
    return name === undefined ? EXIT_USAGE : EXIT_OK
  }
  try {
    if (!group.isCommand(name)) throw new UsageError(`unknown ${group.name} command: ${name}`)
    return await group.run(name, rest, io)
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
export function parseCommandArgs(args: readonly string[], options: ParseArgsConfig['options']): { values: OptionValues; positionals: string[] } {
  try {
    const parsed = parseArgs({ args: [...args], options, allowPositionals: true, strict: true })
    return { values: parsed.values, positionals: parsed.positionals }
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}
