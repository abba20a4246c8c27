// /queue with the upstream as the bottleneck (issue #22, "Done means", second bullet): 500
// asynchronous requests (Prefer: respond-async) from five keys, through three gateways on
// one Redis, to one Azure-like deployment that takes 20 calls a second (60 per 3 s sliding
// window; 1200 rpm, declared as such). The keys' own limits are far above that, so the only
// thing to wait for is the upstream. None fails, all complete at about the upstream's rate
// (500 calls at 20/s: 25 s), the upstream refuses at most a few a minute once the first
// window has taught the gateway its limit (it never admits more than its quota per window:
// what it refuses is what the gateway sent too many), and each key's requests start in the
// order they joined its line.
import t from 'tap'
import { ASYNC, get, post, type QueueView } from '../queue/helpers.ts'
import { pollUntil } from '../helpers/poll.ts'
import { capacityRig, chat } from './capacity-rig.ts'
import { queuedRequestKey } from '../../src/queue/redis-store.ts'

const WINDOW_MS = 3000
const RPM = 1200
const PER_WINDOW = (RPM * WINDOW_MS) / 60_000
const KEYS = 5
const PER_KEY = 100
const TOTAL = KEYS * PER_KEY
/** Upstream 429s allowed per minute once the limit is learned ("at most a few"). */
const FEW_PER_MINUTE = 6

t.test(
  `${TOTAL} async requests, the upstream the bottleneck: all complete, at its rate, in order per key`,
  async (t) => {
    const rig = await capacityRig(t, {
      deployments: [{ name: 'azure', upstream: { rpm: RPM, windowMs: WINDOW_MS }, declare: { rpm: RPM } }],
    })
    const upstream = rig.upstreams.azure!
    const keys = await Promise.all(Array.from({ length: KEYS }, () => rig.key()))

    // The first window teaches the gateway the upstream's short-window limit (its headers, or
    // its first refusals); the upstream's refusals after that are the steady state.
    const learning = pollUntil(
      async () => upstream.stats(),
      (st) => st.served >= PER_WINDOW,
      12_000,
      5,
    )
    // Each key sends its line in order (the next once the last is accepted), the keys at once,
    // each request through the next gateway in turn.
    const started = Date.now()
    const lines = await Promise.all(
      keys.map(async ({ key }, k) => {
        const ids: string[] = []
        for (let i = 0; i < PER_KEY; i++) {
          const gw = rig.gateways[(k + i) % rig.gateways.length]!
          const res = await post(`${gw.url}/queue/chat/completions`, key, chat(`key ${k} call ${i}`), ASYNC)
          if (res.status !== 202) throw new Error(`request ${k}/${i} not accepted: ${res.status} ${res.text}`)
          ids.push(res.json<QueueView>().id)
        }
        return ids
      }),
    )
    const acceptedMs = Date.now() - started
    t.comment(`${TOTAL} requests accepted in ${acceptedMs} ms`)

    // Done when every request has an end, as the store has it (one pipelined read a poll;
    // bounded: 4× the time the upstream's rate needs).
    const ideal = (TOTAL / PER_WINDOW) * WINDOW_MS
    const redis = rig.cluster.ns.redis
    const field = async (name: string): Promise<string[][]> => {
      const pipeline = redis.pipeline()
      for (const ids of lines) for (const id of ids) pipeline.hget(queuedRequestKey(rig.cluster.ns.prefix, id), name)
      const flat = ((await pipeline.exec()) ?? []).map(([, v]) => String(v))
      return lines.map((_, k) => flat.slice(k * PER_KEY, (k + 1) * PER_KEY))
    }
    const ended = await pollUntil(
      () => field('status'),
      (all) => all.flat().every((s) => s === 'completed' || s === 'failed' || s === 'cancelled'),
      Math.ceil((4 * ideal) / 250),
      250,
    )
    const elapsed = Date.now() - started
    t.ok(ended.met, 'every request came to an end')
    const views = await Promise.all(
      lines.flatMap((ids, k) =>
        ids.map(async (id) =>
          (await get(`${rig.gateways[0]!.url}/queue/requests/${id}`, keys[k]!.key)).json<QueueView>(),
        ),
      ),
    )
    const statuses = new Map<string, number>()
    for (const v of views) statuses.set(v.status, (statuses.get(v.status) ?? 0) + 1)
    const stats = upstream.stats()
    t.comment(
      `${TOTAL} requests: ${JSON.stringify(Object.fromEntries(statuses))} in ${(elapsed / 1000).toFixed(1)} s (the upstream's rate alone needs ${(ideal / 1000).toFixed(1)} s); upstream calls ${stats.requests}, served ${stats.served}, 429s ${stats.rateLimited}, per minute ${JSON.stringify(stats.perMinute)}`,
    )
    const failed = views.find((v) => v.status !== 'completed')
    if (failed !== undefined) t.comment(`a request that did not complete: ${JSON.stringify(failed).slice(0, 600)}`)
    t.equal(statuses.get('completed'), TOTAL, `all ${TOTAL} completed, 0 failed`)
    t.ok(
      views.every((v) => v.response?.status_code === 200),
      'every stored result is a 200',
    )
    t.equal(stats.served, TOTAL, 'each ran exactly once upstream')
    // The run as the store timed it: from the first start to the last finish. (Accepting the
    // 500 takes a while on a loaded machine; that is the gateways' pace, not the upstream's.)
    const firstStart = Math.min(...(await field('startedAt')).flat().map(Number))
    const lastFinish = Math.max(...(await field('finishedAt')).flat().map(Number))
    const span = lastFinish - firstStart
    t.comment(
      `run span (first start → last finish): ${(span / 1000).toFixed(1)} s, ${((TOTAL * 1000) / span).toFixed(1)} calls/s for the upstream's ${((PER_WINDOW * 1000) / WINDOW_MS).toFixed(0)}/s`,
    )
    const idealServed = (stats.served / PER_WINDOW) * WINDOW_MS
    t.ok(
      span >= idealServed - WINDOW_MS,
      'no faster than the upstream allows for what it served (it admits no more than its quota per window)',
    )
    t.ok(
      span <= ideal * 1.6 + 5000,
      `at about the upstream's rate (${(span / 1000).toFixed(1)} s for ${(ideal / 1000).toFixed(1)} s)`,
    )
    const learned = (await learning).value
    const steady = stats.rateLimited - learned.rateLimited
    const steadyS = elapsed / 1000 - WINDOW_MS / 1000
    t.comment(
      `upstream 429s: ${learned.rateLimited} in the first window (learning), ${steady} after it in ${steadyS.toFixed(1)} s (${((steady * 60) / steadyS).toFixed(1)} a minute); each at (ms since the upstream started) / how early (ms): ${stats.refusals.map((r) => `${r.at}/${r.earlyMs}`).join(' ')}`,
    )
    // The calls waiting for the upstream wait in a line per gateway and model, released as
    // the store grants room (capacity-line.ts), and the store never counts more room than
    // the upstream's last answer left (corrected by the calls it may not have counted):
    // what the upstream refuses after the first window is bounded, per minute of run (a run
    // shorter than a minute is held to one minute's allowance).
    const allowed = Math.ceil((FEW_PER_MINUTE * Math.max(steadyS, 60)) / 60)
    t.ok(steady <= allowed, `upstream 429s after learning: ${steady}, at most ${allowed} (${FEW_PER_MINUTE} a minute)`)

    // Admission times in ms as the store has them: each key's line in the order it joined.
    const starts = await field('startedAt')
    for (const [k, line] of starts.entries()) {
      const ms = line.map(Number)
      const outOfOrder = ms.filter((s, i) => i > 0 && s < ms[i - 1]!).length
      t.equal(outOfOrder, 0, `key ${k}: its ${PER_KEY} requests started in the order they joined`)
    }
  },
)
