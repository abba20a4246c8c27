// Learned output reservations on running gateways (docs/limits.md "Learned output
// reservations"), on the embedded store and on two instances sharing one Redis: a call
// without max_tokens reserves, against output_tpm, what the key's calls really produced once
// enough of them settled; calls settled on one instance move the reservation the other sees;
// a call that runs longer is charged in full; a tier on `fixed` keeps today's reservation and
// refuses what the learned one admits.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { startFakeUpstream, type FakeUpstream } from '../helpers/fake-upstream.ts'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { createKeyByFetch, createUser, signInByFetch } from '../portal/helpers.ts'

const MODEL = 'learn-model'
const OUTPUT_TPM = 1500
/** What the upstream writes per reply (the gateway sends it a cap of 1,024). */
const SHORT = 40
/** A reply of n words, each one token to the fake upstream. */
const words = (n: number): string => Array.from({ length: n }, () => 'w').join(' ')

interface Called {
  readonly status: number
  readonly remaining: number
  readonly completion: number
  readonly message: string
}

async function call(gw: RunningTollgate, key: string, maxTokens?: number): Promise<Called> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
    }),
  })
  const json = (await res.json()) as { usage?: { completion_tokens?: number }; error?: { message?: string } }
  return {
    status: res.status,
    remaining: Number(res.headers.get('x-ratelimit-remaining-output-tokens')),
    completion: json.usage?.completion_tokens ?? -1,
    message: json.error?.message ?? '',
  }
}

interface ReservationView {
  readonly mode: string
  readonly reserved_per_reply: number | null
  readonly source: string | null
  readonly samples: { key: number; tier: number; model: number }
}

async function reservationOf(gw: RunningTollgate, id: string): Promise<ReservationView | undefined> {
  const res = await fetch(`${gw.url}/admin/keys/${id}/reservations?model=${MODEL}`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  const json = (await res.json()) as { data: ReservationView[] }
  return json.data[0]
}

function configured(up: FakeUpstream, shared: StartOptions): StartOptions {
  return {
    ...shared,
    config: (doc) => {
      shared.config?.(doc)
      // The shared Redis may be slow on a busy machine: an admission waits for it, not for an outage.
      Object.assign(doc.limits as Record<string, unknown>, { redisTimeoutMs: 5000 })
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: up.url } }
      doc.models = [...(doc.models as object[]), { name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      doc.plans = {
        defaultTier: 'Learned',
        tiers: {
          Learned: { outputReservation: { mode: 'learned', minSamples: 5 }, default: { output_tpm: OUTPUT_TPM } },
          Fixed: { outputReservation: { mode: 'fixed' }, default: { output_tpm: OUTPUT_TPM } },
        },
      }
    },
  }
}

for (const store of ['embedded', 'redis'] as const) {
  t.test(`${store}: a call without max_tokens reserves what the key's calls produced`, async (t) => {
    const up = await startFakeUpstream({ replyText: words(SHORT) })
    t.teardown(() => up.close())
    const shared = store === 'redis' ? onSharedRedis(`tgtest:outres:${randomBytes(6).toString('hex')}:`) : {}
    const a = await startTollgate(configured(up, shared))
    t.teardown(() => a.stop())
    // On Redis a second instance; embedded, the one gateway plays both parts.
    const b = store === 'redis' ? await startTollgate(configured(up, shared)) : a
    if (b !== a) t.teardown(() => b.stop())

    // Fixed: each call holds defaultMaxTokens (1,024) of output_tpm while it runs. After twelve
    // calls of 40 tokens (480 used), the thirteenth is refused though 40 more would fit.
    const fixed = await a.createKey({ tier: 'Fixed' })
    const fixedCalls: Called[] = []
    for (let i = 0; i < 14; i++) {
      const c = await call(a, fixed.key)
      fixedCalls.push(c)
      if (c.status !== 200) break
    }
    const refused = fixedCalls.findIndex((c) => c.status !== 200)
    t.equal(refused, 12, 'fixed: the thirteenth call is refused')
    t.equal(fixedCalls[refused]?.status, 429, 'with a 429')
    t.match(fixedCalls[refused]?.message ?? '', /reserved 1024 output tokens/, "it says today's reservation")
    t.ok(12 * SHORT + SHORT <= OUTPUT_TPM, 'though what it would have produced fits: a false 429')
    const fixedView = await reservationOf(a, fixed.id)
    t.equal(fixedView?.mode, 'fixed')
    t.equal(fixedView?.reserved_per_reply, null, 'fixed: nothing learned')

    // Learned: six calls on one instance (each on the fixed reservation while nothing is known)...
    const learned = await a.createKey({ tier: 'Learned' })
    let used = 0
    for (let i = 0; i < 6; i++) {
      const c = await call(a, learned.key)
      t.equal(c.status, 200)
      t.equal(c.remaining, OUTPUT_TPM - used - 1024, `call ${i + 1}: the fixed reservation while learning`)
      used += c.completion
    }
    // ...move the reservation the other one sees.
    const seen = await pollUntil(
      () => reservationOf(b, learned.id),
      (v) => v?.reserved_per_reply !== null && v?.reserved_per_reply !== undefined,
      500,
      20,
    )
    t.ok(seen.met, 'the other instance sees the learned reservation')
    t.equal(seen.value?.source, 'key', "learned from the key's own calls")
    const perReply = seen.value?.reserved_per_reply ?? 0
    t.ok(perReply >= SHORT && perReply <= SHORT * 1.03, `about ${SHORT} per reply: ${perReply}`)

    // Ten more calls on the other instance: sixteen in all, past where fixed refused.
    const reservations: number[] = []
    for (let i = 0; i < 10; i++) {
      const c = await call(b, learned.key)
      t.equal(c.status, 200, `learned call ${i + 7} admitted`)
      reservations.push(OUTPUT_TPM - used - c.remaining)
      used += c.completion
    }
    t.ok(
      reservations.slice(-5).every((r) => r === perReply),
      `the last calls reserve the learned ${perReply}: ${reservations.join(', ')}`,
    )
    t.equal(used, 16 * SHORT, 'what the sixteen produced')

    // A call that turns out longer than its reservation is charged in full when it ends.
    up.options.replyText = words(600)
    const long = await call(b, learned.key)
    t.equal(long.status, 200)
    t.equal(long.completion, 600)
    t.equal(OUTPUT_TPM - used - long.remaining, perReply, 'it reserved the learned amount')
    used += long.completion
    const probe = await call(a, learned.key, 1)
    t.equal(probe.remaining, OUTPUT_TPM - used - 1, 'the window counts all 600 of it')
  })
}

t.test("the portal's key page shows what a call without max_tokens reserves, once learned", async (t) => {
  const up = await startFakeUpstream({ replyText: words(SHORT) })
  t.teardown(() => up.close())
  const gw = await startTollgate(configured(up, {}))
  t.teardown(() => gw.stop())
  await createUser(gw, 'carol', 'carol-password')
  const carol = await signInByFetch(gw.url, 'carol', 'carol-password')
  const key = await createKeyByFetch(carol, 'carol-key')
  const before = await (await carol.get(`/portal/keys/${key.id}`)).text()
  t.match(before, /Output reserved by a call without max_tokens/)
  t.match(before, /not enough calls yet/, 'nothing learned yet')
  for (let i = 0; i < 6; i++) t.equal((await call(gw, key.secret)).status, 200)
  const after = await pollUntil(
    async () => (await carol.get(`/portal/keys/${key.id}`)).text(),
    (page) => page.includes('this key&#39;s calls') || page.includes("this key's calls"),
    200,
    20,
  )
  t.ok(after.met, "learned from this key's calls")
  t.match(after.value, /data-label="Reserved per reply">4[01]</, `about ${SHORT} per reply`)
})
