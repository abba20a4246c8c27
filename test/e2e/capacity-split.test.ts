// Two Azure-like deployments with different quotas behind three gateways on one Redis,
// driven with the official openai SDK (issue #22, "Done means", first bullet).
//
// Each upstream enforces its quota as Azure does, over a short sliding window (Azure counts
// over 1 or 10 s so that a minute's quota is not spent in one burst; here 5 s, to keep the
// file short), and sends x-ratelimit-* headers on every response. Each deployment declares
// its per-minute rpm in the config, as an operator copies it from the Azure portal; the
// short-window limit is what the gateway must learn from the headers (and from the odd 429
// it then steers around). A: 10 per 5 s (120 rpm), B: 20 per 5 s (240 rpm).
//
//  a. 4 calls a second (twice A's quota, two thirds of the sum), SDK with maxRetries 0: every
//     call succeeds, so no upstream 429 reached a client; A gets about a third of the calls
//     (its share of the headroom); the upstreams refuse at most a few calls a minute once the
//     first window has taught the limits.
//  b. A burst far above the sum: the calls without room get the gateway's own 429 (code
//     upstream_capacity_exceeded, retry-after and retry-after-ms, the key's x-ratelimit-*
//     headers), never the upstream's; an SDK client with its default retries then succeeds.
import t from 'tap'
import {
  capacityRig,
  chat,
  gatewayRefusal,
  KEY_RPM,
  paced,
  recordingClient,
  upstreamRefusalIn,
  type Exchange,
} from './capacity-rig.ts'

const WINDOW_MS = 5000
/** Per window: A 10, B 20. */
const A_RPM = 120
const B_RPM = 240
const PER_SECOND = 4
const SECONDS = 20
/** Part c: a steady load above the sum (6/s). */
const OVER_PER_SECOND = 10
const OVER_SECONDS = 12
/** Upstream 429s allowed per minute once the limits are learned ("at most a few"). */
const FEW_PER_MINUTE = 6

const rig = await capacityRig(t, {
  deployments: [
    { name: 'azure-a', upstream: { rpm: A_RPM, windowMs: WINDOW_MS }, declare: { rpm: A_RPM } },
    { name: 'azure-b', upstream: { rpm: B_RPM, windowMs: WINDOW_MS }, declare: { rpm: B_RPM } },
  ],
})
const [a, b] = [rig.upstreams['azure-a']!, rig.upstreams['azure-b']!]
const { key } = await rig.key()

t.test('a. a load above one deployment and below the sum: every call succeeds, split by headroom', async (t) => {
  const clients = rig.gateways.map((gw) => recordingClient(gw, key, { maxRetries: 0 }))
  const total = PER_SECOND * SECONDS
  // The first window teaches the limits; what the upstreams refuse after it is the steady state.
  const learned: { at: { a: number; b: number } | null } = { at: null }
  const started = Date.now()
  const results = await paced(total, PER_SECOND, async (i) => {
    if (i === PER_SECOND * (WINDOW_MS / 1000)) learned.at = { a: a.stats().rateLimited, b: b.stats().rateLimited }
    const client = clients[i % clients.length]!
    try {
      const reply = await client.sdk.chat.completions.create(chat(`call ${i}`) as never)
      return {
        ok: true as const,
        text: (reply as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content,
      }
    } catch (error) {
      return { ok: false as const, error: String(error) }
    }
  })
  const elapsedS = (Date.now() - started) / 1000
  const failed = results.filter((r) => !r.ok)
  const exchanges: Exchange[] = clients.flatMap((c) => c.exchanges)
  t.equal(
    failed.length,
    0,
    `all ${total} SDK calls (maxRetries 0) succeeded${failed.length ? `: ${JSON.stringify(failed.slice(0, 3))}` : ''}`,
  )
  t.notOk(
    exchanges.some((e) => upstreamRefusalIn(e.body)),
    'no upstream 429 reached any client',
  )

  const [sa, sb] = [a.stats(), b.stats()]
  const servedA = sa.served
  const servedB = sb.served
  const share = servedA / (servedA + servedB)
  t.comment(
    `${total} calls in ${elapsedS.toFixed(1)} s over 3 gateways: A served ${servedA}, B served ${servedB} (A's share ${share.toFixed(2)}, its share of the quota 0.33); upstream 429s A ${sa.rateLimited}, B ${sb.rateLimited}`,
  )
  t.equal(servedA + servedB, total, 'each call ran exactly once upstream')
  t.ok(
    share >= 0.2 && share <= 0.45,
    `A took about a third (${share.toFixed(2)}; its share of the quota is 0.33, the weights alone would give 0.5): the split follows headroom`,
  )

  const early = learned.at ?? { a: 0, b: 0 }
  const steady = sa.rateLimited - early.a + (sb.rateLimited - early.b)
  const steadyMinutes = (elapsedS - WINDOW_MS / 1000) / 60
  t.comment(
    `upstream 429s: ${early.a + early.b} while learning (first ${WINDOW_MS / 1000} s), ${steady} after (${(steady / steadyMinutes).toFixed(1)} a minute)`,
  )
  t.ok(
    steady <= Math.ceil(FEW_PER_MINUTE * steadyMinutes),
    `the upstreams refused at most ${FEW_PER_MINUTE} a minute once the limits were learned (${steady} in ${(steadyMinutes * 60).toFixed(0)} s)`,
  )
})

t.test("b. above the sum: the gateway's 429 with retry-after, and the SDK's own retries succeed", async (t) => {
  const before = { a: a.stats(), b: b.stats() }
  // 60 at once: twice the sum of both windows.
  const burst = await Promise.all(
    Array.from({ length: 60 }, async (_, i) => {
      const gw = rig.gateways[i % rig.gateways.length]!
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(chat(`burst ${i}`)),
      })
      return { status: res.status, headers: res.headers, body: await res.text() }
    }),
  )
  const refused = burst.filter((r) => r.status === 429)
  const served = burst.filter((r) => r.status === 200)
  t.comment(`burst of 60: ${served.length} served, ${refused.length} refused by the gateway`)
  t.equal(served.length + refused.length, 60, 'every call was either served or refused with 429')
  t.ok(refused.length >= 30, 'most were refused: there was no room')
  t.notOk(
    burst.some((r) => upstreamRefusalIn(r.body)),
    "none of the refusals is the upstream's",
  )
  const delays: number[] = []
  const wrong: string[] = []
  for (const r of refused) {
    const error = gatewayRefusal(r.body)
    const ms = Number(r.headers.get('retry-after-ms'))
    const s = Number(r.headers.get('retry-after'))
    delays.push(ms)
    if (error?.code !== 'upstream_capacity_exceeded' || error.type !== 'requests') wrong.push(`body ${r.body}`)
    else if (!(ms > 0 && ms <= WINDOW_MS + 1000 && s === Math.ceil(ms / 1000)))
      wrong.push(`retry-after ${r.headers.get('retry-after')}, retry-after-ms ${r.headers.get('retry-after-ms')}`)
    else if (r.headers.get('x-ratelimit-limit-requests') !== String(KEY_RPM))
      wrong.push(`x-ratelimit-limit-requests ${r.headers.get('x-ratelimit-limit-requests')}`)
  }
  t.comment(`retry-after-ms named: ${Math.min(...delays)}–${Math.max(...delays)}`)
  t.same(
    wrong.slice(0, 3),
    [],
    "every refusal: code upstream_capacity_exceeded, type requests, retry-after(-ms) within a window, the key's x-ratelimit-* headers",
  )

  // Full again, on purpose: the SDK's own retries must wait as told, and then get in. The
  // window is 5 s, which a burst on a loaded machine can outlast: each SDK call goes out the
  // moment a fresh burst has been refused once, so it meets a full window.
  const sdkCalls: Array<{ exchanges: Exchange[]; ms: number }> = []
  for (const [i, gw] of rig.gateways.entries()) {
    const client = recordingClient(gw, key)
    await fullAgain(`refill ${i}`)
    const started = Date.now()
    const reply = await client.sdk.chat.completions.create(chat(`sdk ${i}`) as never)
    t.equal((reply as { object: string }).object, 'chat.completion', `the SDK call through gateway ${i} succeeded`)
    sdkCalls.push({ exchanges: client.exchanges, ms: Date.now() - started })
  }
  const retried = sdkCalls.filter((c) => c.exchanges.some((e) => e.status === 429))
  t.comment(
    `SDK calls (default retries): ${sdkCalls.map((c) => `${c.exchanges.map((e) => e.status).join('→')} in ${c.ms} ms`).join('; ')}`,
  )
  t.ok(retried.length >= 1, 'at least one was refused first and succeeded on its retry')
  for (const c of retried) {
    const told = Number(c.exchanges.find((e) => e.status === 429)?.headers.get('retry-after-ms'))
    t.ok(c.ms >= told, `it waited what retry-after-ms said (${told} ms) before succeeding (${c.ms} ms)`)
    t.ok(
      c.exchanges.every((e) => e.status === 200 || gatewayRefusal(e.body)?.code === 'upstream_capacity_exceeded'),
      "every refusal it saw was the gateway's",
    )
  }
  const after = { a: a.stats(), b: b.stats() }
  t.comment(
    `upstream 429s during the burst and the SDK calls: A ${after.a.rateLimited - before.a.rateLimited}, B ${after.b.rateLimited - before.b.rateLimited}`,
  )
})

/** Sends a burst over the gateways; resolves at its first refusal (the deployments are full now), or when it is all answered. */
async function fullAgain(label: string): Promise<void> {
  await new Promise<void>((full) => {
    const calls = Array.from({ length: 40 }, async (_, i) => {
      const gw = rig.gateways[i % rig.gateways.length]!
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(chat(`${label} ${i}`)),
      })
      await res.arrayBuffer()
      if (res.status === 429) full()
    })
    void Promise.all(calls).then(() => full())
  })
}

t.test("c. a steady load above the sum: the clients get the gateway's 429s, the upstreams only a few", async (t) => {
  const clients = rig.gateways.map((gw) => recordingClient(gw, key, { maxRetries: 0 }))
  const before = a.stats().rateLimited + b.stats().rateLimited
  const servedBefore = a.stats().served + b.stats().served
  const started = Date.now()
  const results = await paced(OVER_PER_SECOND * OVER_SECONDS, OVER_PER_SECOND, async (i) => {
    try {
      await clients[i % clients.length]!.sdk.chat.completions.create(chat(`over ${i}`) as never)
      return 200
    } catch (error) {
      return (error as { status?: number }).status ?? 0
    }
  })
  const elapsedS = (Date.now() - started) / 1000
  const upstream429s = a.stats().rateLimited + b.stats().rateLimited - before
  const served = a.stats().served + b.stats().served - servedBefore
  const exchanges = clients.flatMap((c) => c.exchanges)
  t.comment(
    `${results.length} calls at ${OVER_PER_SECOND}/s for ${elapsedS.toFixed(1)} s (the sum of the quotas: 6/s): ${served} served, ${results.filter((r) => r === 429).length} answered the gateway's 429; upstream 429s ${upstream429s} (${((upstream429s * 60) / elapsedS).toFixed(1)} a minute)`,
  )
  t.same([...new Set(results)].sort(), [200, 429], 'each call was served or refused with 429, and both happened')
  t.notOk(
    exchanges.some((e) => upstreamRefusalIn(e.body)),
    "every 429 a client saw was the gateway's",
  )
  t.ok(
    served >= 0.8 * 6 * elapsedS,
    `the quotas were used (${served} served of ${Math.round(6 * elapsedS)} they allow)`,
  )
  t.ok(
    upstream429s <= Math.ceil((FEW_PER_MINUTE * elapsedS) / 60),
    `the upstreams refused at most ${FEW_PER_MINUTE} a minute (${upstream429s} in ${elapsedS.toFixed(0)} s)`,
  )
})
