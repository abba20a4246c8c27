// Reading a running gateway's Prometheus counters in an end-to-end test: the sum of a
// metric's samples whose labels include the given ones.
import type { RunningTollgate } from './gateway.ts'

export async function counterSum(
  gw: Pick<RunningTollgate, 'metricsUrl'>,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  let sum = 0
  for (const line of text.split('\n')) {
    const match = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (match?.[1] !== name) continue
    const have = match[2] ?? ''
    if (Object.entries(labels).every(([k, v]) => have.includes(`${k}="${v}"`))) sum += Number(match[3])
  }
  return sum
}
