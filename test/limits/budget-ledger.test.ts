// Budgets' spend in tollgate.db (embedded mode): every settle is kept at its turn's end, in
// the store's own transaction, so a limiter that dies without writing its snapshot
// (limits.json) loses none of it, a once id committed with its spend is not spent again by
// the run that repeats it, and a turn whose usage rows fail keeps none of its spend either.
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openBudgetLedger } from '../../src/limits/budget-ledger.ts'
import { createLimiter } from '../../src/limits/limiter.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import { turnWritten } from '../../src/turn-batches.ts'
import { callOn, refusal, setup, spec } from './budget-contract.ts'
import { captureLog } from './helpers.ts'

t.test('memory: spend and once ids survive a crash between two snapshots (tollgate.db)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-ledger-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'limits.json')
  const budget = spec({ amountNanos: 300_000 })
  const clock = setup([budget], '2026-11-27T12:00:00Z')
  const r = callOn(budget)
  const once = { id: 'queue:req_1', keepMs: 60_000 }
  const options = { log: captureLog().log, snapshotFile: file, ...clock.options }
  const first = createLimiter({ ...options, budgetLedgerOn: openEmbeddedStores(dir).turnCommit! })
  await (await first.admit(r)).settle(r.estimate, { once })
  await (await first.admit(r)).settle(r.estimate)
  await turnWritten()
  // Killed now: never closed, no snapshot written.
  t.notOk(existsSync(file), 'no snapshot was written')
  const store = openEmbeddedStores(dir)
  const second = createLimiter({ ...options, budgetLedgerOn: store.turnCommit! })
  t.teardown(async () => {
    await second.close()
    await first.close()
    await store.close()
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

t.test("the spend commits with the turn's other writes to the file, or not at all", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-ledger-'))
  const store = openEmbeddedStores(dir)
  t.teardown(async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })
  const turn = store.turnCommit!
  const ledger = openBudgetLedger(turn)
  ledger.journal([['budget:a', 5, 0]], ['queue:req_1', Date.now() + 60_000])
  const usage = store.usage.add([
    {
      keyId: 'k',
      owner: 'o',
      tier: 'T',
      model: 'm',
      day: '2026-12-08',
      requests: 1,
      inputTokens: 1,
      outputTokens: 1,
      costNanos: 5,
    },
  ])
  await usage
  t.same(ledger.read().spent, [['budget:a', 5, 0]], 'kept with the usage row of its turn')
  t.equal((await store.usage.query({ keyId: 'k' }))[0]?.requests, 1)
  ledger.journal([['budget:a', 9, 0]], undefined)
  const failed = turn.write(() => {
    throw new Error('disk full')
  })
  await t.rejects(failed, /disk full/)
  t.same(ledger.read().spent, [['budget:a', 5, 0]], 'a failed turn keeps none of its spend')
})
