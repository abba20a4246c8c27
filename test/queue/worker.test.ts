// The processor with leases, on the embedded store and a corridor that only admits and
// answers: a request leased to an instance is left to it by the shared queue's jobs; a held
// request runs on the record it was given, starts under its lease, and keeps it until it is
// handed back to the shared queue.
import t from 'tap'
import type { Test } from 'tap'
import type { NewRequest, Outcome } from '../../src/queue/ports.ts'
import { localCoordinator } from './local-coordinator.ts'
import { processorParts } from './processor-parts.ts'
import { newRequest } from './store-contract.ts'

/** A processor for instance 'here', with a limiter that admits or refuses as `refuse` says. */
function setup(t: Test, refuse: () => boolean) {
  const { store, coordinator } = localCoordinator(t)
  const parts = processorParts(coordinator, { refuse })
  const held = (request: NewRequest) => parts.held(request, 'here')
  return { store, coordinator, processor: parts.processor, seen: parts.seen, held, metrics: parts.metrics }
}

const signal = new AbortController().signal

t.test('a job of the shared queue leaves a request leased to an instance to it, and looks again later', async (t) => {
  const { store, processor, seen } = setup(t, () => false)
  const r = newRequest()
  await store.submit(r, null, 'elsewhere')
  const before = Date.now()
  const outcome = await processor(r, signal)
  t.equal(outcome.kind, 'later')
  t.ok(outcome.kind === 'later' && outcome.at - before >= 900, 'in about a second')
  t.equal(seen.admissions, 0, 'it asked for no admission')
  t.equal((await store.get(r.id))?.status, 'queued', 'and the request is as it was')
})

t.test('a held request runs on what it was given and starts under its lease; the lease ends with it', async (t) => {
  const { store, coordinator, processor, seen, held, metrics } = setup(t, () => false)
  const r = newRequest()
  coordinator.hold(r.id)
  t.equal(await store.submit(r, null, 'here'), 0)
  const outcome = await processor(r, signal, held(r))
  t.same(outcome, { kind: 'done' })
  t.equal(seen.upstream, 1)
  const after = await store.get(r.id)
  t.equal(after?.status, 'completed')
  t.equal(after?.attempts, 1)
  t.equal(after?.runner, null, 'not leased once finished')
  t.same(await store.leases(), [])
  t.match(await metrics.registry.metrics(), /tollgate_queue_async_starts_total\{path="here"\} 1/)
})

t.test(
  'a held request that must wait stays leased until it is handed back; the shared queue then runs it',
  async (t) => {
    let refusing = true
    const { store, coordinator, processor, seen, held } = setup(t, () => refusing)
    const r = newRequest()
    coordinator.hold(r.id)
    await store.submit(r, null, 'here')
    const outcome: Outcome = await processor(r, signal, held(r))
    t.equal(outcome.kind, 'later', 'over the limit: it waits')
    t.equal(seen.refused, 1)
    t.equal((await store.get(r.id))?.runner, 'here', 'still leased: its runner hands it back')
    refusing = false
    const before = Date.now()
    const meanwhile = await processor(r, signal)
    t.ok(meanwhile.kind === 'later' && meanwhile.at - before >= 900, 'a job that finds it leased looks again later')
    t.equal(seen.admissions, 1, 'and asks for no admission')
    await coordinator.handBackHeld(r, outcome.kind === 'later' ? outcome.at : 0)
    t.equal((await store.get(r.id))?.runner, null, 'handed back: the lease is over')
    t.equal((await store.get(r.id))?.status, 'queued')
    t.same(await processor(r, signal), { kind: 'done' }, 'a job of the shared queue runs it')
    t.equal((await store.get(r.id))?.status, 'completed')
  },
)

t.test('a held request whose lease was handed on meanwhile does not start', async (t) => {
  const { store, processor, seen, held } = setup(t, () => false)
  const r = newRequest()
  await store.submit(r, null, 'here')
  await store.release(r, 'here')
  t.same(await processor(r, signal, held(r)), { kind: 'done' })
  t.equal(seen.admissions, 1, 'admitted')
  t.equal(seen.upstream, 0, 'but never sent: whoever holds it now runs it')
  t.equal((await store.get(r.id))?.status, 'queued')
})
