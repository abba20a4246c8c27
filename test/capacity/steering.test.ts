// The capacity port steering real traffic, before the corridor uses it: two quota-keeping
// upstreams with different quotas, one clock for all, and a caller doing what the corridor
// will do (acquire, send, observe, release; on a refusal move on to the other deployment).
// Below the sum of the quotas nothing is refused to the caller and the split follows the
// headroom; above it the caller is told when to come back, and coming back then works.
import t, { type Test } from 'tap'
import { randomFrom } from '../../src/backends/mock/hash.ts'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { memoryCapacityStore } from '../../src/capacity/memory.ts'
import type { Acquisition, DeploymentCapacity, DeploymentDeclaration } from '../../src/capacity/port.ts'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'
import { startQuotaUpstream, type QuotaUpstream } from '../helpers/quota-upstream.ts'

const T0 = 1_800_000_000_000
const BODY = JSON.stringify({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hello world' }], max_tokens: 5 })

interface Rig {
  readonly clock: { now: number }
  readonly upstreams: Record<'a' | 'b', QuotaUpstream>
  readonly capacity: DeploymentCapacity
}

async function rig(t: Test, declarations: Record<'a' | 'b', DeploymentDeclaration>): Promise<Rig> {
  const clock = { now: T0 }
  const now = (): number => clock.now
  const upstreams = { a: await startQuotaUpstream({ rpm: 30, now }), b: await startQuotaUpstream({ rpm: 60, now }) }
  t.teardown(() => Promise.all([upstreams.a.close(), upstreams.b.close()]))
  const capacity = createDeploymentCapacity(memoryCapacityStore(), {
    deployments: declarations,
    now,
    random: randomFrom(11),
  })
  return { clock, upstreams, capacity }
}

/** One call as the corridor will make it: the upstream's status, or the refusal when every deployment is full. */
async function call(r: Rig): Promise<{ status: number; served: 'a' | 'b' | null; refusal: Acquisition | null }> {
  let candidates: ('a' | 'b')[] = ['a', 'b']
  let status = 0
  while (candidates.length > 0) {
    const got = await r.capacity.acquire(candidates, { tokens: 8 })
    if (!got.ok) return { status: 429, served: null, refusal: got }
    const id = got.lease.deploymentId as 'a' | 'b'
    const res = await fetch(`${r.upstreams[id].url}/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: BODY,
    })
    const text = await res.text()
    const o = observeResponse(res.status, Object.fromEntries(res.headers), { now: r.clock.now, body: text })
    got.lease.observe(o)
    await got.lease.release()
    status = res.status
    if (!o.refused) return { status, served: id, refusal: null }
    candidates = candidates.filter((c) => c !== id)
  }
  return { status, served: null, refusal: null }
}

for (const [name, declarations] of [
  ['declared', { a: { rpm: 30 }, b: { rpm: 60 } }],
  ['learned from the headers alone', { a: {}, b: {} }],
] as const) {
  t.test(
    `${name}: above one quota, below the sum: no refusal reaches the caller, the split follows the headroom`,
    async (t) => {
      const r = await rig(t, declarations)
      const served = { a: 0, b: 0 }
      for (let i = 0; i < 80; i++) {
        r.clock.now = T0 + i * 750
        const result = await call(r)
        t.equal(result.status, 200, `call ${i}`)
        if (result.served !== null) served[result.served] += 1
      }
      const upstream429s = r.upstreams.a.stats().rateLimited + r.upstreams.b.stats().rateLimited
      t.comment(`${name}: a ${served.a}, b ${served.b}, upstream 429s ${upstream429s}`)
      t.ok(upstream429s <= 2, `the upstreams refused ${upstream429s} calls`)
      t.ok(served.a >= 20 && served.a <= 30, `a served ${served.a} of 80 (quota 30 of 90)`)
      t.ok(served.b >= 50 && served.b <= 60, `b served ${served.b}`)
    },
  )
}

t.test(
  'above the sum: the caller is told when the first deployment frees up, and coming back then succeeds',
  async (t) => {
    const r = await rig(t, { a: { rpm: 30 }, b: { rpm: 60 } })
    let refused: Acquisition | null = null
    for (let i = 0; i < 200 && refused === null; i++) {
      r.clock.now = T0 + i * 100
      const result = await call(r)
      refused = result.refusal
    }
    if (refused === null || refused.ok) throw new Error('the load never filled both deployments')
    t.equal(refused.reason, 'full')
    t.ok(refused.retryAt !== null && refused.retryAt > r.clock.now, 'a time to come back, in the future')
    const retryAt = refused.retryAt ?? 0
    r.clock.now = retryAt - 1
    t.equal((await call(r)).status, 429, 'not before')
    r.clock.now = retryAt
    t.equal((await call(r)).status, 200, 'then it succeeds')
    t.equal(
      r.upstreams.a.stats().rateLimited + r.upstreams.b.stats().rateLimited,
      0,
      'the upstreams never had to refuse',
    )
  },
)
