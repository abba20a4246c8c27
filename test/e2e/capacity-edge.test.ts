// Capacity used to the edge (issue #36 item 5 and "Capacity used to the edge"): one model on
// two deployments that enforce fixed request windows (10 and 20 calls per 4 s window, 300 ms a call,
// OpenAI's x-ratelimit-{limit,remaining,reset}-requests on every reply; fixed-windows.ts),
// behind a gateway that learned both figures in an earlier window. Both deployments say
// `window: fixed` (their reset is OpenAI's: the time until the limit is whole), so at the
// reset each has its whole limit again:
//   a. 40 /v2 calls arriving just after the windows reset: the whole room (30) is served,
//      and the upstreams refuse none (on the old code a reset gave back one probe's worth
//      per deployment: 6 served, 34 got the gateway's 429);
//   b. a backlog of 40 drop-in /queue calls is done within ⌈40 / 30⌉ + 1 windows, none
//      refused upstream.
// Both on the memory store (embedded) and on Redis.
import t from 'tap'
import { redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { fixedWindows, type FixedWindows } from './fixed-windows.ts'

const WINDOW_MS = 4000
const PER_WINDOW = [10, 20]
const CALLS = 40
/** Each upstream call takes this long, as a model's would: the burst is admitted before any answer teaches. */
const LATENCY_MS = 300

for (const store of ['memory', 'redis'] as const) {
  t.test(`${store} store`, async (t) => {
    let prefix: string | undefined
    if (store === 'redis') {
      const ns = await redisNamespace(t)
      if (!ns.up) throw new Error(redisMissing())
      prefix = ns.prefix
    }
    const rig: FixedWindows = await fixedWindows({
      windowMs: WINDOW_MS,
      perWindow: PER_WINDOW,
      latencyMs: LATENCY_MS,
      store,
      ...(prefix === undefined ? {} : { prefix }),
    })
    t.teardown(() => rig.stop())
    await rig.learn()

    t.test(`a. ${CALLS} calls just after the reset: the whole room served`, async (t) => {
      const window = await rig.freshWindow()
      const refusedBefore = rig.refused()
      const statuses = await Promise.all(Array.from({ length: CALLS }, (_, i) => rig.call(i)))
      const served = statuses.filter((s) => s === 200).length
      const ended = rig.window()
      t.comment(
        `${store}: ${served} served of ${CALLS} (room ${rig.room}), statuses ${JSON.stringify(statuses.filter((s) => s !== 200))}, windows ${window}..${ended}`,
      )
      t.ok(served >= rig.room, `${served} served: the whole room of ${rig.room}`)
      t.ok(
        statuses.every((s) => s === 200 || s === 429),
        'the rest got the gateway 429 (never the upstream refusal)',
      )
      t.equal(
        rig.refused() - refusedBefore,
        0,
        `the upstreams refused none (each refusal, ms since its upstream started / how early: ${rig.upstreams
          .map((u) => u.stats().refusals.map((r) => `${r.at}/${r.earlyMs}`))
          .join(' ')}; the gateway's warnings: ${JSON.stringify(
          rig.gateway
            .logs()
            .filter((l) => Number(l.level) >= 40)
            .slice(-3),
        )})`,
      )
    })

    t.test(`b. a backlog of ${CALLS} drop-in /queue calls: done within ⌈N / room⌉ + 1 windows`, async (t) => {
      const window = await rig.freshWindow()
      const refusedBefore = rig.refused()
      const started = Date.now()
      const ends = await Promise.all(Array.from({ length: CALLS }, (_, i) => rig.queued(i)))
      const last = Math.max(...ends.map((e) => e.endedAt))
      const took = Math.floor(last / WINDOW_MS) - window + 1
      const bound = Math.ceil(CALLS / rig.room) + 1
      t.comment(
        `${store}: ${CALLS} queued calls done in ${last - started} ms, windows taken ${took} (bound ${bound}); upstream 429s ${rig.refused() - refusedBefore}`,
      )
      t.ok(
        ends.every((e) => e.status === 200),
        `every call answered 200 (${JSON.stringify(ends.map((e) => e.status).filter((s) => s !== 200))})`,
      )
      t.ok(took <= bound, `${took} windows, at most ${bound}`)
      t.equal(rig.refused() - refusedBefore, 0, 'the upstreams refused none')
    })
  })
}
