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
