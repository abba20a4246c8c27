// A gateway's memory, measured from outside: start it with MEMORY_PROBE as its execArgv,
// then memoryOf() asks for a sample after garbage collection.
import { join } from 'node:path'
import type { RunningTollgate } from './gateway.ts'

export const MEMORY_PROBE: readonly string[] = ['--expose-gc', '--import', join(import.meta.dirname, 'memory-probe.ts')]

export interface MemorySample {
  readonly rss: number
  readonly heapUsed: number
  readonly external: number
  readonly arrayBuffers: number
}

/** Collects garbage in the gateway and returns its memory then. */
export async function memoryOf(gw: RunningTollgate, timeoutMs = 10_000): Promise<MemorySample> {
  const seen = gw.output().length
  gw.child.kill('SIGUSR2')
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    const line = gw
      .output()
      .slice(seen)
      .split('\n')
      .find((l) => l.startsWith('memory {'))
    if (line !== undefined) return JSON.parse(line.slice('memory '.length)) as MemorySample
    await new Promise((r) => setTimeout(r, 20))
  }
  throw new Error('the gateway sent no memory sample (was it started with MEMORY_PROBE?)')
}

/** Resident memory of a process from /proc, without disturbing it. */
export async function rssOf(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises')
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1]
  if (kb === undefined) throw new Error(`no VmRSS for ${pid}`)
  return Number(kb) * 1024
}

export const MiB = 1024 * 1024
