// The queue's capacity line (src/queue/capacity-line.ts): calls every deployment refused
// wait in the order they were refused, only the head tries, a grant lets the next try at
// once, a refusal keeps the head waiting for its new time or for room, and a call that
// leaves takes its place out. No sleeps: each step waits on the promise that must settle.
import t from 'tap'
import { createCapacityLine, type CapacityTurn } from '../../src/queue/capacity-line.ts'

const DEPLOYMENTS = ['a/m', 'b/m']
/** Far enough that only room() or a grant can let anyone try during a test. */
const LATER = (): number => Date.now() + 60_000

/** Enters the line and records, in `order`, when its turn came. */
function enter(
  line: ReturnType<typeof createCapacityLine>,
  name: string,
  order: string[],
  retryAt: number,
  signal: AbortSignal = new AbortController().signal,
): Promise<CapacityTurn | null> {
  return line.enter(DEPLOYMENTS, retryAt, signal).then((turn) => {
    order.push(turn === null ? `${name} left` : name)
    return turn
  })
}

t.test('only the head tries; a grant lets the next try at once, in the order they came', async (t) => {
  const line = createCapacityLine()
  const order: string[] = []
  const first = enter(line, 'first', order, Date.now())
  const second = enter(line, 'second', order, Date.now())
  const third = enter(line, 'third', order, Date.now())
  const turn1 = await first
  t.same(order, ['first'], 'the head tries; the others wait behind it although their time has come')
  t.equal(line.waiting(), 3)
  turn1?.pass(true)
  const turn2 = await second
  t.same(order, ['first', 'second'])
  turn2?.pass(true)
  ;(await third)?.pass(true)
  t.same(order, ['first', 'second', 'third'])
  t.equal(line.waiting(), 0, 'the line is gone once empty')
})

t.test('a refused head keeps its place and waits for its new time, or for room', async (t) => {
  const line = createCapacityLine()
  const order: string[] = []
  const head = await enter(line, 'head', order, Date.now())
  const behind = enter(line, 'behind', order, Date.now())
  if (head === null) return t.fail('the head got no turn')
  // Refused again, for a minute: room on one of its deployments cuts that short.
  const again = head.again(LATER()).then((ok) => order.push(`head again ${ok}`))
  line.room('elsewhere/m')
  line.room('b/m')
  await again
  t.same(order, ['head', 'head again true'], 'room on another model does nothing; on its own, the head tries again')
  // Refused for a moment: the head tries again then, still before the one behind it.
  await head.again(Date.now() + 20)
  t.same(order, ['head', 'head again true'], 'the one behind still waits')
  head.pass(true)
  ;(await behind)?.pass(true)
  t.same(order, ['head', 'head again true', 'behind'])
})

t.test('a call that leaves takes its place out of the line', async (t) => {
  const line = createCapacityLine()
  const order: string[] = []
  const head = await enter(line, 'head', order, Date.now())
  const leaving = new AbortController()
  const gone = enter(line, 'gone', order, Date.now(), leaving.signal)
  const last = enter(line, 'last', order, Date.now())
  leaving.abort()
  t.equal(await gone, null)
  t.equal(line.waiting(), 2)
  head?.pass(true)
  ;(await last)?.pass(true)
  t.same(order, ['head', 'gone left', 'last'])

  // A head waiting for its time that leaves hands the wait to the next.
  const waitingHead = new AbortController()
  const h = enter(line, 'h', order, LATER(), waitingHead.signal)
  const n = enter(line, 'n', order, LATER())
  waitingHead.abort()
  t.equal(await h, null)
  line.room('a/m')
  ;(await n)?.pass(true)
  t.same(order.slice(3), ['h left', 'n'])
  const already = new AbortController()
  already.abort()
  t.equal(await line.enter(DEPLOYMENTS, Date.now(), already.signal), null, 'a call already gone never joins')
  t.equal(line.waiting(), 0)
})

t.test('a class waits ahead of the lower ones, first come first served within it', async (t) => {
  const line = createCapacityLine()
  const order: string[] = []
  // Each takes its turn and passes it on at once (granted), so the next tries.
  const at = (name: string, band: number): Promise<void> =>
    line.enter(DEPLOYMENTS, LATER(), new AbortController().signal, { model: 'm', party: name, band }).then((turn) => {
      order.push(name)
      turn?.pass(true)
    })
  // bandOf's order: priority below default below flex; only the order matters here.
  const turns = [at('flex-1', 1), at('flex-2', 1), at('default-1', 0), at('priority-1', -1), at('default-2', 0)]
  t.same(order, [], 'nobody tries before room')
  line.room('a/m')
  await Promise.all(turns)
  t.same(order, ['priority-1', 'default-1', 'default-2', 'flex-1', 'flex-2'])
})
