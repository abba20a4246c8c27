// Reads the event-loop delay of a gateway started with bench/loop-probe.ts: asks it by
// SIGUSR2 and waits for its answer on stderr. Each reading starts the next afresh.
import { join } from 'node:path'
import type { RunningTollgate } from '../test/helpers/gateway.ts'

/** Node flags that load the probe into a gateway process. */
export const LOOP_PROBE = ['--import', join(import.meta.dirname, 'loop-probe.ts')]

/** The worst event-loop delay, in ms, since the last reading (or since start). */
export async function loopDelay(gw: RunningTollgate): Promise<number> {
  const readings = (): string[] =>
    gw
      .output()
      .split('\n')
      .filter((l) => l.startsWith('loop-delay '))
  const seen = readings().length
  gw.child.kill('SIGUSR2')
  for (let i = 0; i < 1200; i++) {
    const lines = readings()
    if (lines.length > seen)
      return (JSON.parse(lines.at(-1)?.slice('loop-delay '.length) ?? '{}') as { maxMs: number }).maxMs
    await new Promise((done) => setTimeout(done, 50))
  }
  throw new Error('the loop probe did not answer')
}
