// A self-hosted server's in-flight limit across a fleet (issue #22, "Done means", third
// bullet): a deployment that declares maxConcurrent: 4, in front of an upstream that takes
// 150 ms per call and counts how many it holds at once, behind three gateways on one Redis.
// 48 streaming calls at once through the openai SDK (16 per gateway); the calls without a
// free slot get the gateway's 429 with retry-after-ms, which the SDK honours. Measured at
// the upstream: never more than 4 in flight, and 4 reached (the limit was the bottleneck,
// not the load).
import t from 'tap'
import { capacityRig, chat, recordingClient } from './capacity-rig.ts'

const MAX_CONCURRENT = 4
const CALLS = 48

t.test(`maxConcurrent ${MAX_CONCURRENT}: never more in flight at the upstream, across three gateways`, async (t) => {
  const rig = await capacityRig(t, {
    deployments: [
      {
        name: 'vllm',
        upstream: { maxConcurrent: MAX_CONCURRENT, latencyMs: 150, replyTokens: 20 },
        declare: { maxConcurrent: MAX_CONCURRENT },
      },
    ],
  })
  const upstream = rig.upstreams.vllm!
  const { key } = await rig.key()
  const clients = rig.gateways.map((gw) => recordingClient(gw, key, { maxRetries: 100 }))
  const started = Date.now()
  const texts = await Promise.all(
    Array.from({ length: CALLS }, async (_, i) => {
      const stream = await clients[i % clients.length]!.sdk.chat.completions.create({
        ...(chat(`stream ${i}`) as { model: string; messages: Array<{ role: 'user'; content: string }> }),
        max_tokens: 20,
        stream: true,
      })
      let text = ''
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
      return text
    }),
  )
  const elapsed = Date.now() - started
  const stats = upstream.stats()
  const exchanges = clients.flatMap((c) => c.exchanges)
  const refusals = exchanges.filter((e) => e.status === 429)
  t.comment(
    `${CALLS} streams in ${elapsed} ms; upstream peak in flight ${stats.peakInFlight}, over the limit ${stats.overConcurrency}, served ${stats.served}; gateway 429s answered ${refusals.length} (retried by the SDK)`,
  )
  t.ok(
    texts.every((text) => text.trim().split(/\s+/).length === 20),
    `all ${CALLS} streams arrived whole`,
  )
  t.equal(stats.served, CALLS, 'each ran once upstream')
  t.ok(
    stats.peakInFlight <= MAX_CONCURRENT,
    `never more than ${MAX_CONCURRENT} in flight at the upstream (${stats.peakInFlight})`,
  )
  t.equal(stats.overConcurrency, 0, 'no call arrived while the upstream already held 4')
  t.equal(stats.peakInFlight, MAX_CONCURRENT, 'and the limit was reached: it was the bottleneck')
  t.ok(
    refusals.every((e) => Number(e.headers.get('retry-after-ms')) > 0 && e.body.includes('upstream_capacity_exceeded')),
    "the calls that found no slot got the gateway's 429 with retry-after-ms",
  )
})
