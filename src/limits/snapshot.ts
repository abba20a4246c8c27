// The in-memory counters kept in a file across restarts (the embedded store has no Redis):
// without it a restart would hand every key its lifetime quota back.
//
// Read once at creation, written every few seconds and on close. The write goes to a
// temporary file renamed over the old one, so a crash mid-write leaves the last whole
// snapshot. Trouble is logged, never thrown: the counters in memory stay authoritative.
import { readFileSync } from 'node:fs'
import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Logger } from '../observability/logger.ts'
import type { MemoryCounters } from './memory-counters.ts'

export interface SnapshotOptions {
  readonly file: string
  readonly everyMs: number
  readonly log: Logger
}

export interface Snapshots {
  /** Stops the timer and writes the counters one last time. */
  close(): Promise<void>
}

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Restores `memory` from the file (a missing file is a first start) and keeps saving it. */
export function keepSnapshots(
  memory: Pick<MemoryCounters, 'snapshot' | 'restore'>,
  options: SnapshotOptions,
): Snapshots {
  const { file, log } = options

  async function save(): Promise<void> {
    try {
      await mkdir(dirname(file), { recursive: true, mode: 0o700 })
      await writeFile(`${file}.tmp`, JSON.stringify(memory.snapshot()), { mode: 0o600 })
      await rename(`${file}.tmp`, file)
    } catch (error) {
      log.warn({ err: describe(error), file }, 'rate limiter could not save its counters')
    }
  }

  try {
    memory.restore(JSON.parse(readFileSync(file, 'utf8')))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      log.warn({ err: describe(error), file }, 'rate limiter could not read its saved counters; starting empty')
  }
  const timer = setInterval(() => void save(), options.everyMs)
  timer.unref()

  return {
    async close() {
      clearInterval(timer)
      await save()
    },
  }
}
