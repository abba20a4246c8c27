// Memory at rest (issue 24): started as `npm start` starts it (with --expose-gc), the gateway
// runs one compacting collection before it listens and says so on its listening line, and
// one after each burst once nothing has been in flight for a while; started without the
// flag, as the tests start it, it runs none.
import { readFileSync } from 'node:fs'
import t from 'tap'
import type { Test } from 'tap'
import { compactAfterBursts } from '../../src/compact-heap.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'

const listening = (logs: ReadonlyArray<Record<string, unknown>>): Record<string, unknown> | undefined =>
  logs.find((line) => line.msg === 'tollgate listening')
const compactions = (logs: ReadonlyArray<Record<string, unknown>>): Array<Record<string, unknown>> =>
  logs.filter((line) => line.msg === 'heap compacted after a burst')

/** A stand-in for the exposed gc() for the test's length: it counts the collections asked of it. */
function standInGc(t: Test): { readonly collections: number } {
  const real = globalThis.gc
  const counted = { collections: 0 }
  globalThis.gc = (() => {
    counted.collections++
  }) as typeof globalThis.gc
  t.teardown(() => {
    globalThis.gc = real
  })
  return counted
}

t.test('npm start passes --expose-gc', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string }
  }
  t.match(pkg.scripts.start, /^(exec )?node .*--expose-gc.* bin\/tollgate serve$/)
})

t.test('with --expose-gc the heap is compacted before listening', async (t) => {
  const gw = await startTollgate({ execArgv: ['--expose-gc'] })
  t.teardown(() => gw.stop())
  t.equal(listening(gw.logs())?.heapCompacted, true)
})

t.test('without it, nothing is collected by hand', async (t) => {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  t.equal(listening(gw.logs())?.heapCompacted, false)
})

t.test(
  'after a burst: one collection once quiet, only while nothing is in flight, not again without growth',
  async (t) => {
    const gc = standInGc(t)
    let ticks = 0
    let inFlight = true
    const logged: unknown[] = []
    const stop = compactAfterBursts(
      () => {
        ticks++
        return inFlight ? 0 : 60_000
      },
      { quietMs: 40, minGrowthBytes: 4 * 1024 * 1024 },
      { info: (fields: unknown) => logged.push(fields) } as never,
    )
    t.teardown(stop)
    const tick = async (n: number): Promise<void> => {
      const until = ticks + n
      t.ok(
        (
          await pollUntil(
            async () => ticks,
            (seen) => seen >= until,
            500,
            5,
          )
        ).met,
        `${n} more checks ran`,
      )
    }
    // The burst: the memory grows well past the threshold while a request is in flight.
    const held = Array.from({ length: 200_000 }, (_, i) => ({ i, text: `burst ${i}`.repeat(4) }))
    await tick(5)
    t.equal(gc.collections, 0, 'nothing collected while a request is in flight')
    inFlight = false
    t.ok(
      (
        await pollUntil(
          async () => gc.collections,
          (n) => n > 0,
          500,
          5,
        )
      ).met,
      'collected once quiet',
    )
    await tick(5)
    // This process's own memory is what is measured: on a busy machine it can grow again by the
    // threshold meanwhile (the runner's own work), and then a second collection is right.
    const lines = logged as Array<{ rssBefore: number; rssAfter: number }>
    t.equal(lines.length, gc.collections, 'each collection logged')
    t.ok(
      lines.slice(1).every((line, i) => line.rssBefore >= (lines[i]?.rssAfter ?? 0) + 4 * 1024 * 1024),
      `not again while the memory has not grown since (${gc.collections} collections)`,
    )
    t.match(logged[0], { rssBefore: Number, rssAfter: Number, heapBefore: Number, heapAfter: Number, pauseMs: Number })
    t.ok(held.length > 0)
  },
)

t.test('off: quietMs 0 collects nothing, however idle', async (t) => {
  const gc = standInGc(t)
  let asked = 0
  const stop = compactAfterBursts(
    () => {
      asked++
      return 60_000
    },
    { quietMs: 0, minGrowthBytes: 1 },
    { info: () => undefined } as never,
  )
  stop()
  t.equal(gc.collections, 0)
  t.equal(asked, 0, 'no timer was set')
})

t.test('a running gateway compacts after a burst, and hands heap back', async (t) => {
  const gw = await startTollgate({
    execArgv: ['--expose-gc'],
    config: (doc) => {
      ;(doc.server as Record<string, unknown>).heapCompaction = { quietMs: 200, minGrowthBytes: 1024 * 1024 }
    },
  })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey()
  const body = JSON.stringify({
    model: 'Mistral-Small-24B-Instruct-2501',
    messages: [{ role: 'user', content: 'Say hello in five words. '.repeat(200) }],
    max_tokens: 5,
  })
  // Bursts until one has grown the heap by the threshold and the gateway, quiet, has compacted.
  const seen = await pollUntil(
    async () => {
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          const res = await fetch(`${gw.url}/v2/chat/completions`, {
            method: 'POST',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            body,
          })
          await res.arrayBuffer()
        }),
      )
      return compactions(gw.logs())
    },
    // Resident memory triggers a compaction, and it can grow outside the heap (buffers, a busy
    // machine's allocator); so bursts go on until one compaction found heap to hand back.
    (lines) => lines.some((l) => Number(l.heapAfter) < Number(l.heapBefore)),
    200,
    300,
  )
  t.ok(seen.met, 'a compaction after a burst handed heap back')
  t.ok(
    compactions(gw.logs()).every((l) => Number(l.heapAfter) <= Number(l.heapBefore)),
    'no compaction grew the heap',
  )
  // Counted as logged: read after the log, each compaction is in the metrics already.
  const logged = compactions(gw.logs())
  t.ok((await counterSum(gw, 'tollgate_heap_compaction_seconds_count')) >= logged.length, 'each compaction counted')
  const released = logged.reduce((sum, l) => sum + Math.max(0, Number(l.rssBefore) - Number(l.rssAfter)), 0)
  t.ok(
    (await counterSum(gw, 'tollgate_heap_compaction_released_bytes_total')) >= released,
    `the memory handed back counted (at least the ${released} bytes the log lines say)`,
  )
})
