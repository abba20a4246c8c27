// Where uploads wait on disk while they are forwarded. Each file is named after the
// process that wrote it, so that a gateway starting up can remove what a crashed one left
// behind (its process is gone) without touching the uploads of another gateway that
// shares the data directory and is still running.
import { randomUUID } from 'node:crypto'
import { readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'

const PATTERN = /^upload-(\d+)-[0-9a-f-]+$/

export function spoolFileName(): string {
  return `upload-${process.pid}-${randomUUID()}`
}

function alive(pid: number): boolean {
  if (pid === process.pid) return true
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Removes the spool files of processes that are gone (and any of an unknown name); returns how many. */
export async function removeStaleSpoolFiles(dir: string): Promise<number> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0
    throw err
  }
  let removed = 0
  for (const name of names) {
    const match = PATTERN.exec(name)
    if (match !== null && alive(Number(match[1]))) continue
    await rm(join(dir, name), { force: true, recursive: true })
    removed++
  }
  return removed
}
