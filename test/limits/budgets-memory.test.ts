// Budgets on the embedded store: counters in this process, held to the same contract as on
// Redis, and kept across a restart in the limiter's snapshot.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import { callOn, budgetContract, refusal, setup, spec, type MakeLimiters } from './budget-contract.ts'
import { budgetOnceContract } from './budget-once.ts'
import { captureLog, quietMetrics } from './helpers.ts'

const makeMemory: MakeLimiters = async (count, options) => {
  if (count !== 1) throw new Error('one limiter per process on memory')
  return [createLimiter({ log: captureLog().log, metrics: quietMetrics(), ...options })]
}
budgetContract(t, 'memory', makeMemory, 1)
budgetOnceContract(t, 'memory', makeMemory, 1)

t.test('memory: what was spent, and the thresholds reported, survive a restart (limits.json)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-budgets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'limits.json')
  const budget = spec({ amountNanos: 200_000 })
  const clock = setup([budget], '2026-11-27T12:00:00Z')
  const r = callOn(budget)
  const first = createLimiter({ log: captureLog().log, snapshotFile: file, ...clock.options })
  await (await first.admit(r)).settle(r.estimate)
  await first.close()
  t.same(
    clock.events.map((e) => e.threshold),
    [50],
  )
  const second = createLimiter({ log: captureLog().log, snapshotFile: file, ...clock.options })
  t.teardown(() => second.close())
  await (await second.admit(r)).settle(r.estimate)
  t.same(
    clock.events.map((e) => e.threshold),
    [50, 80, 100],
    '50 % not again after the restart',
  )
  t.equal((await refusal(second, r)).errorName, 'budget_exhausted')
})

t.test(
  'memory: a once id is kept in limits.json with the spend it committed: after a restart, not spent again',
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'tg-budgets-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    const file = join(dir, 'limits.json')
    const budget = spec({ amountNanos: 1_000_000 })
    const clock = setup([budget], '2026-11-27T12:00:00Z')
    const r = callOn(budget)
    const once = { id: 'queue:req_1', keepMs: 60_000 }
    const first = createLimiter({ log: captureLog().log, snapshotFile: file, ...clock.options })
    await (await first.admit(r)).settle(r.estimate, { once })
    await first.close()
    const second = createLimiter({ log: captureLog().log, snapshotFile: file, ...clock.options })
    t.teardown(() => second.close())
    await (await second.admit(r)).settle(r.estimate, { once })
    const [status] = (await second.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'T' })) ?? []
    t.equal(status?.spent, 0.0001, 'spent once')
    t.equal(status?.reserved, 0, 'the repeat holds nothing')
  },
)
