// The coordinator hands the turn on and heals lines: a call of this gateway that no waiting
// request holds any more (it could not leave while the store was away) is taken out when
// the sweep reaches it, and the call behind it is woken; a stored request at a head is
// scheduled.
import t from 'tap'
import { createLogger } from '../../src/observability/logger.ts'
import { Coordinator } from '../../src/queue/coordinator.ts'
import type { JobRunner, RequestRef, Ticket } from '../../src/queue/ports.ts'
import { localSignals } from '../../src/queue/signals.ts'
import { StoreUnavailableError } from '../../src/store/errors.ts'
import { lineOf } from '../../src/queue/tickets.ts'
import { localCoordinator } from './local-coordinator.ts'
import { newRequest } from './store-contract.ts'

t.test('an orphaned call at the head is taken out and the call behind it woken', async (t) => {
  const { store, coordinator } = localCoordinator(t)
  const line = lineOf('key_o', 'm')
  const orphan: Ticket = { kind: 'call', instance: 'here', id: 'gone', joinedAt: 1 }
  const waiting: Ticket = { kind: 'call', instance: 'here', id: 'waits', joinedAt: 2 }
  let woken = 0
  coordinator.onTurn('waits', () => {
    woken++
  })
  await store.join(line, orphan)
  await store.join(line, waiting)
  await coordinator.sweep(10)
  for (let i = 0; i < 50 && woken === 0; i++) await new Promise((done) => setTimeout(done, 10))
  t.equal(await store.position(line, orphan), null, 'the orphan is out')
  t.equal(await store.position(line, waiting), 0, 'the call behind it is head')
  t.equal(woken, 1, 'and was told')
})

t.test('a stored request at a head is scheduled, with its line', async (t) => {
  const { store, runner, coordinator } = localCoordinator(t)
  const ran: RequestRef[] = []
  runner.start(async (ref) => {
    ran.push(ref)
    return { kind: 'done' }
  }, 1)
  const r = newRequest()
  await store.submit(r, null)
  await coordinator.sweep(10)
  for (let i = 0; i < 50 && ran.length === 0; i++) await new Promise((done) => setTimeout(done, 10))
  t.same(ran, [{ id: r.id, line: r.line, createdAt: r.createdAt }])
})

t.test('priorities by tier: listed tiers by their number, unlisted after them', async (t) => {
  const { coordinator: c } = localCoordinator(t, { instance: 'x', tierPriority: { Gold: 1, Silver: 5 } })
  t.equal(c.priorityOf('Gold'), 1)
  t.equal(c.priorityOf('Silver'), 5)
  t.equal(c.priorityOf('Basic'), 6)
})

t.test(
  "leases nobody runs go to the shared queue: a stopped gateway's, and this gateway's own that it no longer runs",
  async (t) => {
    const { store, runner, coordinator } = localCoordinator(t)
    const ran: string[] = []
    runner.start(async (ref) => {
      ran.push(ref.id)
      return { kind: 'done' }
    }, 4)
    const ofStopped = newRequest({ keyId: 'key_1' })
    const ofLive = newRequest({ keyId: 'key_2' })
    const ownRunning = newRequest({ keyId: 'key_3' })
    const ownDropped = newRequest({ keyId: 'key_4' })
    await store.heartbeat('live', 60_000)
    await store.heartbeat('here', 60_000)
    await store.submit(ofStopped, null, 'stopped')
    await store.submit(ofLive, null, 'live')
    coordinator.hold(ownRunning.id)
    await store.submit(ownRunning, null, 'here')
    await store.submit(ownDropped, null, 'here')

    await coordinator.checkLeases()
    for (let i = 0; i < 50 && ran.length < 2; i++) await new Promise((done) => setTimeout(done, 10))
    t.same(ran.sort(), [ofStopped.id, ownDropped.id].sort(), 'the two nobody runs were scheduled')
    t.equal((await store.get(ofStopped.id))?.runner, null, 'their leases ended')
    t.equal((await store.get(ownDropped.id))?.runner, null)
    t.equal((await store.get(ofLive.id))?.runner, 'live', 'a live gateway keeps its lease')
    t.equal((await store.get(ownRunning.id))?.runner, 'here', 'and so does this one, for what it runs')

    coordinator.unhold(ownRunning.id)
    await coordinator.checkLeases()
    for (let i = 0; i < 50 && ran.length < 3; i++) await new Promise((done) => setTimeout(done, 10))
    t.ok(ran.includes(ownRunning.id), 'once it no longer runs it, it goes too')
  },
)

t.test(
  'a lease ends only once its request is scheduled: one that cannot be yet stays leased for the next check',
  async (t) => {
    const { store, runner } = localCoordinator(t)
    let refusing = true
    const ran: string[] = []
    runner.start(async (ref) => {
      ran.push(ref.id)
      return { kind: 'done' }
    }, 1)
    // The shared queue refuses for a while (Redis slow or away, or a stopping gateway's queues closed).
    const flaky: JobRunner = {
      ...runner,
      schedule: async (request, options) => {
        if (refusing) throw new StoreUnavailableError('the queue is away')
        await runner.schedule(request, options)
      },
    }
    const coordinator = new Coordinator({
      store,
      runner: flaky,
      instance: 'here',
      tierPriority: {},
      log: createLogger('silent'),
      signals: localSignals,
    })
    t.teardown(() => coordinator.close())
    const ofStopped = newRequest({ keyId: 'key_1' })
    const heldHere = newRequest({ keyId: 'key_2' })
    await store.submit(ofStopped, null, 'stopped')
    coordinator.hold(heldHere.id)
    await store.submit(heldHere, null, 'here')

    await coordinator.checkLeases()
    t.equal(
      (await store.get(ofStopped.id))?.runner,
      'stopped',
      "a stopped gateway's lease stays while its request cannot be scheduled",
    )
    await coordinator.handBackHeld(heldHere, Date.now())
    t.equal((await store.get(heldHere.id))?.runner, 'here', 'and so does a held one this gateway could not hand back')

    refusing = false
    await coordinator.checkLeases()
    for (let i = 0; i < 50 && ran.length < 2; i++) await new Promise((done) => setTimeout(done, 10))
    t.same(ran.sort(), [ofStopped.id, heldHere.id].sort(), 'the next check scheduled both')
    t.same(await store.leases(), [], 'and then ended their leases')
  },
)
