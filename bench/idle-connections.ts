// What idle keep-alive connections cost the gateway: 2,000 and then 5,000 connections,
// each having made one request, held open; the gateway's memory after garbage collection
// (from a probe loaded into it) and its RSS, per connection. From ten loopback addresses,
// 500 each, within the default per-address cap of 1,000.
//
//   node bench/idle-connections.ts   prints a Markdown section
import { startTollgate } from '../test/helpers/gateway.ts'
import { openIdleConnections, type IdleConnections } from '../test/helpers/idle-connections.ts'
import { MEMORY_PROBE, MiB, memoryOf, type MemorySample } from '../test/helpers/memory.ts'

const STEPS = [2000, 5000] as const

export async function benchIdleConnections(): Promise<string> {
  const gw = await startTollgate({ execArgv: MEMORY_PROBE, dropRequestLogs: true })
  const held: IdleConnections[] = []
  try {
    const port = Number(new URL(gw.url).port)
    await (await openIdleConnections(port, 200)).close()
    const before = await memoryOf(gw)
    const samples: Array<{ connections: number; memory: MemorySample; open: number }> = []
    let open = 0
    for (const step of STEPS) {
      // The next batch from the next addresses.
      const batch = await openIdleConnections(port, step - open, 500, 10 + Math.ceil(open / 500))
      held.push(batch)
      open = step
      samples.push({ connections: step, memory: await memoryOf(gw), open: held.reduce((sum, c) => sum + c.open(), 0) })
    }
    for (const c of held.splice(0)) await c.close()
    // Thousands of closes take the gateway a moment to process.
    await new Promise((r) => setTimeout(r, 2000))
    const after = await memoryOf(gw)
    const kib = (bytes: number): string => (bytes / 1024).toFixed(1)
    return [
      '## Idle keep-alive connections, memory (bench/idle-connections.ts)',
      '',
      'One gateway (default configuration); connections from ten loopback addresses, 500 per',
      'address, each sends one GET /healthz and then stays open, idle (keep-alive, 65 s).',
      "Memory is the gateway's after garbage collection (a probe loaded into it), against",
      'the same reading after 200 warm-up connections had come and gone.',
      '',
      '| Idle connections | still open | RSS (MiB) | RSS per connection (KiB) | heap + external per connection (KiB) |',
      '|---|---|---|---|---|',
      `| 0 | 0 | ${(before.rss / MiB).toFixed(1)} | | |`,
      ...samples.map(
        ({ connections, memory, open: stillOpen }) =>
          `| ${connections.toLocaleString('en-US')} | ${stillOpen.toLocaleString('en-US')} | ${(memory.rss / MiB).toFixed(1)} | ${kib((memory.rss - before.rss) / connections)} | ${kib((memory.heapUsed + memory.external - before.heapUsed - before.external) / connections)} |`,
      ),
      `| 0 again (all closed) | 0 | ${(after.rss / MiB).toFixed(1)} | | heap ${((after.heapUsed - before.heapUsed) / MiB).toFixed(2)} MiB over the first reading |`,
      '',
      "The kernel's socket buffers are not in these figures (they are not the process's memory).",
      '',
    ].join('\n')
  } finally {
    for (const c of held) await c.close()
    await gw.stop()
  }
}

if (import.meta.main) process.stdout.write(`${await benchIdleConnections()}\n`)
