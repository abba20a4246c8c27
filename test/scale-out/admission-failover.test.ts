// The limits hold through an instance killed and a Redis master failing over in the middle
// of mixed traffic (issue #39, "done means"): two gateways on the Sentinel topology
// (test/helpers/redis-topologies.sh), one key with an output_tpm limit driven past it by
// calls of every class (priority, default, flex), half of them without max_tokens, so they
// are admitted on the learned output reservation (every reply is 40 tokens: the learned
// reservation is exact). Once the key is refused, the master serving Tollgate's keys is
// killed; once an instance is off Redis, the second gateway is SIGKILLed; once the first is
// back on Redis, the traffic goes on for a while more. Then:
//  - the output tokens admitted stay within the documented bound (docs/limits.md, "When
//    Redis is in trouble"): the limit Redis counted, plus each instance's 1/n share in
//    insurance while the master was away, plus the calls whose counts the master had not
//    yet replicated when it died (two, as the scale-out suite allows);
//  - every request stored with Prefer: respond-async before the kills ends completed.
// Everything waits on a condition (a refusal seen, readiness, a count of outcomes), never on
// a fixed time. The shared topology's master changes: tests on the Sentinel topology that
// run at the same time see a failover (they find the master anew, as the scale-out suite
// does); at the end the killed node is started again and rejoins as a replica, as the
// scale-out suite leaves it.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request } from '../helpers/http.ts'
import { pollUntil } from '../helpers/poll.ts'
import {
  deleteUnderPrefix,
  ensureTopology,
  gatewayEnv,
  killNode,
  masterPort,
  masterPorts,
  restartNode,
  topologyClient,
} from '../helpers/topologies.ts'
import { whenReady } from '../../src/store/redis-client.ts'
import { until, type QueueView } from '../queue/helpers.ts'

t.setTimeout(120_000)
const MODEL = 'failover-model'
const OUTPUT_TPM = 2000
const REPLY = 40
const INSTANCES = 2
/** Longer than the test: every admission of the limited key falls in its first window. */
const WINDOW_MS = 180_000
const CLASSES = ['priority', 'default', 'flex'] as const

await ensureTopology('sentinel')
const prefix = `tgtest:${randomBytes(6).toString('hex')}:`
const redis = topologyClient('sentinel')
await whenReady(redis)
t.teardown(async () => {
  await deleteUnderPrefix(redis, prefix).catch(() => undefined)
  redis.disconnect()
})
// A streamed reply takes REPLY × 50 ms: the stored requests (streamed) are still running at the kills.
const up = await startFakeUpstream({ replyText: Array.from({ length: REPLY }, () => 'w').join(' '), eventDelayMs: 50 })
t.teardown(() => up.close())

const adminToken = `adm_${randomBytes(16).toString('hex')}`
const secret = `admission-failover-${randomBytes(16).toString('hex')}`
const start = (): Promise<RunningTollgate> =>
  startTollgate({
    adminToken,
    env: { ...gatewayEnv('sentinel'), TOLLGATE_KEY_SECRET: secret },
    dropRequestLogs: true,
    config: (doc) => {
      Object.assign(doc.store as Record<string, unknown>, { keyPrefix: prefix, commandTimeoutMs: 1000 })
      doc.limits = {
        onRedisDown: 'insurance',
        windowMs: WINDOW_MS,
        insuranceInstances: INSTANCES,
        redisTimeoutMs: 1000,
        probeIntervalMs: 200,
      }
      doc.queue = { retryBackoffMs: 50, sweepIntervalMs: 1000 }
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: up.url } }
      doc.models = [...(doc.models as object[]), { name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      doc.plans = {
        defaultTier: 'Mixed',
        tiers: {
          Mixed: { outputReservation: { mode: 'learned', minSamples: 5 }, default: { output_tpm: OUTPUT_TPM } },
          Open: { default: { rpm: 100_000 } },
        },
      }
    },
  })
const a = await start()
t.teardown(() => a.stop())
const b = await start()
t.teardown(() => b.stop())
const all = [a, b]

interface Outcome {
  readonly at: number
  readonly status: number | string
  readonly output: number
}

async function call(
  gw: RunningTollgate,
  key: string,
  i: number,
  extra: Record<string, unknown> = {},
): Promise<Outcome> {
  try {
    const res = await request(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: `call ${i}` }],
        service_tier: CLASSES[i % CLASSES.length],
        // Half name no output cap: the learned reservation.
        ...(i % 2 === 0 ? {} : { max_tokens: REPLY }),
        ...extra,
      }),
    })
    const output =
      res.status === 200 ? (res.json<{ usage?: { completion_tokens?: number } }>().usage?.completion_tokens ?? 0) : 0
    return { at: Date.now(), status: res.status, output }
  } catch (error) {
    return { at: Date.now(), status: `fetch: ${(error as Error).message}`, output: 0 }
  }
}

async function readiness(gw: RunningTollgate): Promise<{ store?: string; limiter?: string }> {
  try {
    return (await (await fetch(`${gw.url}/readyz`)).json()) as { store?: string; limiter?: string }
  } catch {
    return {}
  }
}

/** Until `check` holds (polled, bounded): fails the test with `what` when it never does. */
async function reached(what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const seen = await pollUntil(
    async () => await check(),
    (ok) => ok,
    Math.ceil(ms / 25),
    25,
  )
  if (!seen.met) throw new Error(`never: ${what}`)
}

t.test('admitted output tokens stay within the insurance bound; no stored request is lost', async (t) => {
  // The tier learns what its calls produce (minSamples 5), on both instances.
  const learner = await a.createKey({ tier: 'Mixed' })
  for (let i = 0; i < 8; i++) await call(all[i % 2] as RunningTollgate, learner.key, 2 * i)
  const limited = await a.createKey({ tier: 'Mixed' })
  await reached('the limited key reserves about the learned length', async () => {
    const res = await fetch(`${a.url}/admin/keys/${limited.id}/reservations?model=${MODEL}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    })
    const view = (await res.json()) as { data: Array<{ reserved_per_reply: number | null }> }
    const reserved = view.data[0]?.reserved_per_reply
    return typeof reserved === 'number' && reserved < 2 * REPLY
  })

  const storer = await a.createKey({ tier: 'Open' })

  // Two clients per instance, each call after the last, every class, with and without max_tokens.
  const results: Outcome[] = []
  let stop = false
  let killedB = false
  const clients = Array.from({ length: 2 * INSTANCES }, async (_, c) => {
    const gw = all[c % INSTANCES] as RunningTollgate
    for (let i = c; !stop; i += 2 * INSTANCES) {
      if (gw === b && killedB) return
      results.push(await call(gw, limited.key, i))
    }
  })
  const master = await masterPort('sentinel')
  if (master === undefined) throw new Error('Sentinel names no master')
  let restarted = false
  try {
    await reached('the key is refused on its limit', () => results.some((r) => r.status === 429))
    // Stored requests (streamed, about 2 s each), on a key of their own with room, taken by
    // both instances' workers just before the kills: each must end completed, whole.
    const stored = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const res = await request(`${all[i % 2]!.url}/queue/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${storer.key}`,
            'content-type': 'application/json',
            prefer: 'respond-async',
          },
          body: JSON.stringify({
            model: MODEL,
            messages: [{ role: 'user', content: `stored ${i}` }],
            max_tokens: 5,
            stream: true,
          }),
        })
        if (res.status !== 202) throw new Error(`stored request ${i}: ${res.status} ${res.text}`)
        return res.json<QueueView>().id
      }),
    )
    await reached(
      'the stored requests running',
      () => up.requests.filter((r) => JSON.stringify(r.json).includes('stored ')).length >= 4,
    )
    const beforeKill = results.filter((r) => r.status === 200).length
    const killedAt = Date.now()
    await killNode(master)
    t.comment(`killed the master on ${master} after ${beforeKill} admitted calls`)
    await reached('an instance is off Redis', async () =>
      (await Promise.all(all.map(readiness))).some((s) => s.limiter !== 'redis'),
    )
    // The second instance dies outright mid-outage: no drain, its calls in flight cut.
    killedB = true
    await b.stop('SIGKILL')
    t.comment(`SIGKILLed the second gateway ${Date.now() - killedAt} ms after the master`)
    await reached(
      'the first instance is back on Redis',
      async () => {
        const s = await readiness(a)
        return s.store === 'up' && s.limiter === 'redis'
      },
      40_000,
    )
    const recoveredAt = Date.now()
    t.comment(`the first instance is back on Redis ${recoveredAt - killedAt} ms after the kill`)
    // Some more traffic on the new master.
    const after = results.length
    await reached('forty more calls on the new master', () => results.length >= after + 40)
    stop = true
    await Promise.all(clients)

    const admitted = results.filter((r) => r.status === 200)
    const tokens = admitted.reduce((sum, r) => sum + r.output, 0)
    const errors = results.filter((r) => r.status !== 200 && r.status !== 429)
    const insurance = INSTANCES * Math.floor(OUTPUT_TPM / INSTANCES)
    const unreplicated = 2 * REPLY
    const bound = OUTPUT_TPM + insurance + unreplicated
    t.comment(
      `${results.length} calls, ${admitted.length} admitted: ${tokens} output tokens for a limit of ${OUTPUT_TPM} ` +
        `(bound ${bound}: the limit, ${insurance} in insurance, ${unreplicated} unreplicated); ${errors.length} errors`,
    )
    t.ok(
      admitted.every((r) => r.output === REPLY),
      'every admitted reply is as long as learned',
    )
    t.ok(tokens >= OUTPUT_TPM - REPLY, `the limit was reached (${tokens})`)
    t.ok(tokens <= bound, `admitted output tokens within the documented bound (${tokens} ≤ ${bound})`)
    const afterRecovery = results.filter((r) => r.at > recoveredAt)
    const admittedAfter = afterRecovery.filter((r) => r.status === 200).length
    t.ok(
      admittedAfter <= 2,
      `back on Redis, the new master refuses what its counters hold (${admittedAfter} of ${afterRecovery.length} admitted: at most the 2 unreplicated)`,
    )
    // Calls cut by the kills (in flight on the dead master or the dead gateway): a handful.
    t.ok(errors.length <= 10, `at most 10 calls failed at the kills: ${errors.map((e) => e.status).join(', ')}`)

    const ended = await Promise.all(
      stored.map((id) =>
        until(
          `${a.url}/queue/requests/${id}`,
          storer.key,
          ['completed', 'failed', 'cancelled', 'expired'],
          45_000,
        ).catch((err: unknown) => ({ status: `not ended: ${(err as Error).message}` }) as QueueView),
      ),
    )
    t.same(
      ended.map((q) => q.status),
      stored.map(() => 'completed'),
      'every stored request completed: none lost with the master or the gateway',
    )
    t.ok(
      ended.every((q) => String(q.response?.body ?? '').includes('data: [DONE]')),
      'each with its whole stream',
    )
    await restartNode(master)
    restarted = true
    t.notOk((await masterPorts('sentinel')).includes(master), 'the killed node rejoined as a replica')
  } finally {
    stop = true
    await Promise.all(clients)
    if (!restarted) await restartNode(master).catch(() => undefined)
  }
})
