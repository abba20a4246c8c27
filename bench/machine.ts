// What the numbers ran on, recorded next to them.
import { execFileSync } from 'node:child_process'
import { cpus, loadavg, release, totalmem, type as osType } from 'node:os'

export function machine(): string {
  const cpu = cpus()
  let redis = 'unknown'
  try {
    redis = /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? redis
  } catch {
    /* not installed */
  }
  return [
    `- CPU: ${cpu[0]?.model ?? 'unknown'} × ${cpu.length} (as the OS reports them)`,
    `- Memory: ${Math.round(totalmem() / 2 ** 30)} GiB`,
    `- OS: ${osType()} ${release()}`,
    `- Node: ${process.version}; Redis: ${redis} on loopback, no persistence`,
    `- Load average when the run ended: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(', ')} (other work on the machine skews the numbers)`,
  ].join('\n')
}
