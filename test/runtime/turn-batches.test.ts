// A turn of the event loop ends in one callback: every batch the turn opened is sent, then
// what was held for the turn's end is flushed (a corked Redis socket), whatever order they
// came in, so a turn's commands on one connection leave in one write.
import t from 'tap'
import { flushAtTurnEnd, turnBatches, turnWritten } from '../../src/turn-batches.ts'

t.test('the batches of a turn are sent before its flushes, whichever came first', async (t) => {
  const order: string[] = []
  const admissions = turnBatches(
    () => [] as string[],
    async (batch) => {
      order.push(`send ${batch.join('+')}`)
      // A batch's command corks its socket as it is sent: that flush runs in this same end.
      flushAtTurnEnd(() => order.push('flush of the send'))
      return batch.length
    },
  )
  flushAtTurnEnd(() => order.push('flush'))
  admissions('slot').batch.push('a')
  const { batch, sent } = admissions('slot')
  batch.push('b')
  t.equal(await sent, 2, "both of the turn's calls in one batch")
  t.same(order, ['send a+b', 'flush', 'flush of the send'])
})

t.test('a batch whose send throws rejects its callers; the rest of the turn still runs', async (t) => {
  const failing = turnBatches(
    () => null,
    (): Promise<never> => {
      throw new Error('no connection')
    },
  )
  const fine = turnBatches(
    () => null,
    async () => 'sent',
  )
  let flushed = false
  flushAtTurnEnd(() => {
    flushed = true
  })
  const [a, b] = await Promise.allSettled([failing('x').sent, fine('x').sent])
  t.match(a, { status: 'rejected', reason: { message: 'no connection' } })
  t.same(b, { status: 'fulfilled', value: 'sent' })
  t.ok(flushed, 'the flush ran')
})

t.test('a caller after the turn has ended gets a batch of its own, sent at the next end', async (t) => {
  const sends: number[] = []
  const rows = turnBatches(
    () => [] as number[],
    async (batch) => {
      sends.push(batch.length)
    },
  )
  const first = rows('')
  first.batch.push(1, 2)
  await first.sent
  const second = rows('')
  t.not(second, first)
  second.batch.push(3)
  await second.sent
  t.same(sends, [2, 1])
})

t.test(
  'turnWritten resolves once the turn has ended: its batches sent and its flushes (a store commit among them) run',
  async (t) => {
    const order: string[] = []
    const rows = turnBatches(
      () => [] as string[],
      (batch) => {
        order.push(`send ${batch.join('+')}`)
        // The store's group commit joins the same end (store/embedded.ts).
        flushAtTurnEnd(() => order.push('commit'))
        // Its reply comes later: turnWritten does not wait for it.
        return new Promise<void>(() => undefined)
      },
    )
    rows('usage').batch.push('a')
    await turnWritten()
    t.same(order, ['send a', 'commit'], 'written: sent and committed, the reply not awaited')

    // With nothing pending it still waits for a turn's end, so a write made after the call in
    // the same turn (one more microtask on) is covered too.
    const late: string[] = []
    const written = turnWritten().then(() => late.push('written'))
    await Promise.resolve()
    flushAtTurnEnd(() => late.push('flushed'))
    await written
    t.same(late, ['flushed', 'written'])
  },
)
