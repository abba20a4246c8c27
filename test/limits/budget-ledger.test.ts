// Budgets' spend in budget-spend.db (embedded mode): every settle is kept at its turn's end,
// so a limiter that dies without writing its snapshot (limits.json) loses none of it, and a
// once id committed with its spend is not spent again by the run that repeats it.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { createLimiter } from '../../src/limits/limiter.ts'
import { turnWritten } from '../../src/turn-batches.ts'
import { callOn, refusal, setup, spec } from './budget-contract.ts'
import { captureLog } from './helpers.ts'

t.test('memory: spend and once ids survive a crash between two snapshots (budget-spend.db)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-ledger-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'limits.json')
  const budget = spec({ amountNanos: 300_000 })
  const clock = setup([budget], '2026-11-27T12:00:00Z')
  const r = callOn(budget)
  const once = { id: 'queue:req_1', keepMs: 60_000 }
  const options = { log: captureLog().log, snapshotFile: file, budgetLedgerDir: dir, ...clock.options }
  const first = createLimiter(options)
  await (await first.admit(r)).settle(r.estimate, { once })
  await (await first.admit(r)).settle(r.estimate)
  await turnWritten()
  // Killed now: never closed, no snapshot written.
  t.notOk(existsSync(file), 'no snapshot was written')
  const second = createLimiter(options)
  t.teardown(async () => {
    await second.close()
    await first.close()
  })
  const status = async (): Promise<number | undefined> =>
    (await second.budgetStatus?.({ keyId: budget.id, owner: budget.id, tier: 'T' }))?.[0]?.spent
  t.equal(await status(), 0.0002, 'both calls still spent')
  await (await second.admit(r)).settle(r.estimate, { once })
  t.equal(await status(), 0.0002, 'the repeat under the once id spends nothing')
  await (await second.admit(r)).settle(r.estimate)
  t.equal(await status(), 0.0003)
  t.equal((await refusal(second, r)).errorName, 'budget_exhausted', 'beyond the budget: refused')
})
