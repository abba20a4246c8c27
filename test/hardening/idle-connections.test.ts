// 2,000 idle keep-alive connections cost the gateway a bounded amount of memory, and it
// gives it back when they close. The bound is loose (a busy shared machine); the figure
// itself is recorded by `npm run bench -- idle-connections`.
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { MEMORY_PROBE, MiB, memoryOf } from '../helpers/memory.ts'
import { openIdleConnections } from '../helpers/idle-connections.ts'

const CONNECTIONS = 2000
/** Per connection, resident. Node's own cost is a few KiB; this catches a buffer or a timer kept per socket. */
const BOUND_PER_CONNECTION = 64 * 1024

let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate({ execArgv: MEMORY_PROBE })
})
t.teardown(async () => {
  await gw.stop()
})

t.test(`${CONNECTIONS} idle keep-alive connections cost a bounded amount of memory`, async (t) => {
  const port = Number(new URL(gw.url).port)
  // Warm up: the first connections allocate what every later one reuses.
  await (await openIdleConnections(port, 200)).close()
  const before = await memoryOf(gw)

  // From four loopback addresses: within the default cap of connections per address.
  const idle = await openIdleConnections(port, CONNECTIONS)
  try {
    const held = await memoryOf(gw)
    const perConnection = (held.rss - before.rss) / CONNECTIONS
    const heapPerConnection = (held.heapUsed + held.external - before.heapUsed - before.external) / CONNECTIONS
    t.equal(idle.open(), CONNECTIONS, 'all of them are still open')
    t.ok(
      perConnection < BOUND_PER_CONNECTION,
      `resident memory per idle connection: ${(perConnection / 1024).toFixed(1)} KiB`,
    )
    t.ok(
      heapPerConnection < BOUND_PER_CONNECTION / 2,
      `of which heap and external: ${(heapPerConnection / 1024).toFixed(1)} KiB`,
    )
    t.equal(await idle.request(Math.floor(CONNECTIONS / 2)), 200, 'an idle connection still serves a request')
    t.comment(
      `rss ${(before.rss / MiB).toFixed(1)} → ${(held.rss / MiB).toFixed(1)} MiB for ${CONNECTIONS} connections`,
    )
  } finally {
    await idle.close()
  }
  // Thousands of closes take the gateway a moment to process.
  await new Promise((r) => setTimeout(r, 1500))
  const after = await memoryOf(gw)
  t.ok(
    after.heapUsed < before.heapUsed + 4 * MiB,
    `their heap is given back when they close (${((after.heapUsed - before.heapUsed) / MiB).toFixed(2)} MiB left)`,
  )
})
