// What the capacity layer promises whatever its store does: a store that fails costs the
// call nothing (it goes on, picked by weight, and the error is reported), release never
// throws, and nonsense in declarations or usage is read as "no limit" or "the estimate".
import t from 'tap'
import { createDeploymentCapacity } from '../../src/capacity/capacity.ts'
import { memoryCapacityStore } from '../../src/capacity/memory.ts'
import { DEFAULT_RULES, type CapacityStore } from '../../src/capacity/port.ts'
import { observeResponse } from '../../src/capacity/upstream-headers.ts'
import { pollUntil } from '../helpers/poll.ts'
import { counting } from './contract.ts'

const failing = (): CapacityStore => ({
  ...memoryCapacityStore(),
  acquire: () => Promise.reject(new Error('Redis did not answer')),
  release: () => Promise.reject(new Error('Redis did not answer')),
})

t.test('a failing store: the call goes on by weight, release does not throw, both errors are reported', async (t) => {
  const errors: unknown[] = []
  const capacity = createDeploymentCapacity(failing(), {
    deployments: { a: { rpm: 10, weight: 0 }, b: { rpm: 10 } },
    onError: (e) => errors.push(e),
  })
  const got = await capacity.acquire(['a', 'b'], { tokens: 10 })
  t.equal(got.ok, true)
  if (!got.ok) return
  t.equal(got.lease.deploymentId, 'b')
  t.equal(got.lease.tracked, false)
  got.lease.observe(observeResponse(429, { 'retry-after': '1' }, { now: Date.now() }))
  await got.lease.release()
  t.equal(errors.length, 2)
})

t.test('no candidates: full, with no time to come back', async (t) => {
  const capacity = createDeploymentCapacity(memoryCapacityStore(), { deployments: {} })
  t.same(await capacity.acquire([], { tokens: 0 }), { ok: false, reason: 'full', retryAt: null })
})

t.test('nonsense declarations and usage', async (t) => {
  const store = memoryCapacityStore()
  const capacity = createDeploymentCapacity(store, {
    deployments: { a: { rpm: Number.NaN, tpm: -5, maxConcurrent: Infinity, weight: -1 }, b: { rpm: 2 } },
    now: () => 1_800_000_000_000,
  })
  const a = await capacity.acquire(['a'], { tokens: 5 })
  t.equal(a.ok && a.lease.tracked, false, 'no valid limit: untracked')
  const b = await capacity.acquire(['b'], { tokens: Number.NaN })
  if (!b.ok) throw new Error('refused')
  await b.lease.release({ tokens: Number.POSITIVE_INFINITY })
  t.same((await capacity.inspect(['b']))[0]?.requests, 1)
})

t.test('a held slot on a maxConcurrent deployment renews itself until released', async (t) => {
  const spy = counting(memoryCapacityStore({ ...DEFAULT_RULES, leaseTtlMs: 600 }))
  const capacity = createDeploymentCapacity(spy.store, { deployments: { a: { maxConcurrent: 1 } } })
  const got = await capacity.acquire(['a'], { tokens: 0 })
  if (!got.ok) throw new Error('refused')
  // Renewed every 200 ms: after 4 renewals (800 ms, past the 600 ms ttl) the slot is still held.
  t.ok(
    (
      await pollUntil(
        async () => spy.calls(),
        (n) => n >= 5,
        300,
        10,
      )
    ).met,
  )
  t.equal((await capacity.acquire(['a'], { tokens: 0 })).ok, false)
  await got.lease.release()
  const after = spy.calls()
  t.equal((await capacity.acquire(['a'], { tokens: 0 })).ok, true)
  t.equal(spy.calls(), after + 1, 'no renewal after release, only the new acquire')
})

t.test('a share: the call fills only its share of each declared limit; the whole stays for the rest', async (t) => {
  const events: string[] = []
  const capacity = createDeploymentCapacity(memoryCapacityStore(), {
    deployments: { a: { maxConcurrent: 5, tpm: 1000 } },
    onSaturated: (id, reason) => events.push(`${id} ${reason}`),
  })
  const flex = { tokens: 10, share: 0.8 }
  const held = []
  for (let i = 0; i < 4; i++) {
    const got = await capacity.acquire(['a'], flex)
    if (!got.ok) throw new Error(`flex ${i} refused`)
    held.push(got.lease)
  }
  const shed = await capacity.acquire(['a'], flex)
  t.match(shed, { ok: false, reason: 'full' }, 'the fifth at 0.8 of 5 slots is refused')
  t.same(events, [], 'a refusal on a share says nothing of the deployment being full')
  const whole = await capacity.acquire(['a'], { tokens: 10 })
  t.equal(whole.ok, true, 'a call of the whole still has the fifth slot')
  if (whole.ok) held.push(whole.lease)
  t.same((await capacity.inspect(['a']))[0]?.inFlight, 5, 'every slot counted on the deployment’s own state')
  // Larger than the share of tpm (800) but not than the whole: refused as full, never too large.
  for (const lease of held) await lease.release({ tokens: 0 })
  const big = await capacity.acquire(['a'], { tokens: 900, share: 0.8 })
  t.equal(big.ok, true, 'with the window empty, it goes')
  if (big.ok) await big.lease.release({ tokens: 900 })
  t.match(await capacity.acquire(['a'], { tokens: 900, share: 0.8 }), { ok: false, reason: 'full' })
})
