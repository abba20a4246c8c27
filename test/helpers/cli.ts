// The `tollgate` command run as an operator runs it: a child process of this Node on the
// checkout's src/cli.ts, with only PATH, HOME and what the test gives in its environment.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'

export const CLI = resolve(import.meta.dirname, '../../src/cli.ts')

export interface CliRun {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `tollgate …args`; resolves with its exit code and output, whatever the code. */
export function runTollgate(args: readonly string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [CLI, ...args],
      { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr })
      },
    )
  })
}
