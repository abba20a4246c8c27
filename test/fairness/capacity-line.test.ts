// The capacity line with fair shares (src/queue/capacity-line.ts, `fairness`): the waiter
// that tries next is the one of the lowest band whose party has the lowest counter; one
// party alone, or counters that cannot be read, leave it first come first served; arriving
// parties are announced (their lift), and a fresh call finds the line it must join.
import t from 'tap'
import {
  createCapacityLine,
  HOLD_MS,
  type CapacityTurn,
  type LineFairness,
  type LineSeat,
} from '../../src/queue/capacity-line.ts'

const DEPLOYMENTS = ['a/m']
const LATER = (): number => Date.now() + 60_000

function fairness(
  counters: Record<string, number> | 'down',
  elsewhere?: number,
): LineFairness & { arrivals: string[]; overtakes: number } {
  const f = {
    arrivals: [] as string[],
    overtakes: 0,
    async counters(_model: string, parties: readonly string[]) {
      return counters === 'down' ? undefined : { counters: parties.map((p) => counters[p] ?? 0), elsewhere }
    },
    arrived(_model: string, party: string) {
      f.arrivals.push(party)
    },
    overtook() {
      f.overtakes++
    },
  }
  return f
}

const seat = (party: string, band = 0): LineSeat => ({ model: 'm', party, band })

/** Everyone enters (the line waits for room), then room() lets them through one at a time; the order they tried in. */
async function orderOf(line: ReturnType<typeof createCapacityLine>, seats: LineSeat[]): Promise<string[]> {
  const order: string[] = []
  const turns = seats.map((s, i) =>
    line.enter(DEPLOYMENTS, LATER(), new AbortController().signal, s).then((turn: CapacityTurn | null) => {
      order.push(`${s.party}${i}`)
      turn?.pass(true)
    }),
  )
  line.room('a/m')
  await Promise.all(turns)
  return order
}

t.test('lowest counter first within a band, band before counter, arrival order on ties', async (t) => {
  const f = fairness({ heavy: 900, light: 100, mid: 500 })
  const line = createCapacityLine(Date.now, f)
  const order = await orderOf(line, [seat('heavy'), seat('heavy'), seat('mid'), seat('light'), seat('heavy', -1e15)])
  t.same(
    order,
    ['heavy4', 'light3', 'mid2', 'heavy0', 'heavy1'],
    'priority first whatever its counter, then by counter',
  )
  t.same(f.arrivals, ['heavy', 'heavy', 'mid', 'light', 'heavy'], 'each arrival is announced for its lift')
  t.ok(f.overtakes >= 2)
})

t.test('counters that cannot be read leave it first come first served', async (t) => {
  const line = createCapacityLine(Date.now, fairness('down'))
  t.same(await orderOf(line, [seat('x'), seat('y'), seat('x')]), ['x0', 'y1', 'x2'])
})

t.test('without fairness the line is first come first served and never crowded', async (t) => {
  const line = createCapacityLine()
  const entering = line.enter(DEPLOYMENTS, LATER(), new AbortController().signal, seat('x'))
  t.equal(line.crowded('m'), undefined)
  line.room('a/m')
  ;(await entering)?.pass(true)
})

t.test('crowded names the deployments of the line a model waits in', async (t) => {
  const line = createCapacityLine(Date.now, fairness({}))
  t.equal(line.crowded('m'), undefined)
  const leave = new AbortController()
  const entering = line.enter(DEPLOYMENTS, LATER(), leave.signal, seat('x'))
  t.same(line.crowded('m'), DEPLOYMENTS)
  t.equal(line.crowded('other'), undefined)
  leave.abort()
  t.equal(await entering, null)
  t.equal(line.crowded('m'), undefined, 'no one waits any more')
})

t.test('a party further below its share waiting on another gateway: the head holds back for it, once', async (t) => {
  const line = createCapacityLine(Date.now, fairness({ heavy: 900 }, 100))
  const started = Date.now()
  const turn = await line.enter(DEPLOYMENTS, Date.now(), new AbortController().signal, seat('heavy'))
  t.ok(Date.now() - started >= HOLD_MS - 5, `held back about ${HOLD_MS} ms (${Date.now() - started} ms)`)
  turn?.pass(true)
  const even = createCapacityLine(Date.now, fairness({ heavy: 900 }, 950))
  const priority = createCapacityLine(Date.now, fairness({ heavy: 900 }, 100))
  const at = Date.now()
  ;(await even.enter(DEPLOYMENTS, Date.now(), new AbortController().signal, seat('heavy')))?.pass(true)
  ;(await priority.enter(DEPLOYMENTS, Date.now(), new AbortController().signal, seat('heavy', -1e15)))?.pass(true)
  t.ok(Date.now() - at < HOLD_MS, 'no hold when the others are not below it, nor for a priority call')
})
