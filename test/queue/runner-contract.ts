// The behaviour every JobRunner must show. Run by runner-local.test.ts and
// runner-bullmq.test.ts; each subtest gets a fresh runner (and a fresh queue).
import type { Test } from 'tap'
import type { KeyRecord } from '../../src/keys/record.ts'
import type { Held, JobRunner, Outcome, Processor, QueuedRequest, RequestRef } from '../../src/queue/ports.ts'
import { openInFreshSpace } from './spaces.ts'

export interface RunnerSpace {
  /** A runner on this space: more than one share the scheduled work (Redis: instances). */
  open(): Promise<JobRunner>
  cleanup(): Promise<void>
  /**
   * Waits until a runner holds these scheduled jobs, waiting for a worker (a sharded
   * BullMQ runner takes each shard's jobs as they come, and orders by priority the ones it
   * holds; a job still on its way from another shard's queue is not among them yet).
   * False if they were not all held within `ms`.
   */
  held?(ids: readonly string[], ms: number): Promise<boolean>
  /**
   * The id of the `n`th of several requests, each on a shard of its own (sharded: a
   * shard's worker takes one job per free place, so priority orders the jobs the runner
   * holds, not those still behind another on their shard).
   */
  spread?(name: string, n: number): string
}

/** A stored request to schedule: its line and creation time travel with it to the processor. */
const job = (id: string): RequestRef => ({ id, line: `key_${id}:m`, createdAt: 1_700_000_000_000 })

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms))

async function until(check: () => boolean, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (check()) return true
    await sleep(10)
  }
  return check()
}

/** Records every run: which id, when, and how many ran at once. */
function recorder(outcome: (id: string, run: number) => Outcome | Promise<Outcome> = () => ({ kind: 'done' })) {
  const runs: Array<{ id: string; at: number }> = []
  let active = 0
  let peak = 0
  const counts = new Map<string, number>()
  const refs: RequestRef[] = []
  const processor: Processor = async (request) => {
    const { id } = request
    refs.push(request)
    active++
    peak = Math.max(peak, active)
    const n = (counts.get(id) ?? 0) + 1
    counts.set(id, n)
    runs.push({ id, at: Date.now() })
    try {
      return await outcome(id, n)
    } finally {
      active--
    }
  }
  return { processor, runs, refs, peak: () => peak }
}

export function runnerContract(t: Test, name: string, makeSpace: () => Promise<RunnerSpace>): void {
  const withRunner = (title: string, body: (t: Test, runner: JobRunner, space: RunnerSpace) => Promise<void>): void => {
    t.test(`${name}: ${title}`, async (t) => {
      const {
        space,
        opened: [runner],
      } = await openInFreshSpace(t, makeSpace, async (space) => [await space.open()])
      await body(t, runner, space)
    })
  }

  withRunner('a scheduled request runs once, even when scheduled twice', async (t, runner) => {
    const r = recorder()
    runner.start(r.processor, 4)
    await runner.schedule(job('a'))
    await runner.schedule(job('a'))
    await runner.schedule(job('b'))
    t.ok(await until(() => r.runs.length >= 2))
    await sleep(150)
    t.same(r.runs.map((x) => x.id).sort(), ['a', 'b'])
    t.same(
      r.refs.find((x) => x.id === 'a'),
      job('a'),
      'the processor gets the line and creation time',
    )
    t.ok(runner.healthy())
  })

  withRunner('a delay is honoured; "later" runs it again when due; wake brings it forward', async (t, runner) => {
    const r = recorder((id, n) => (id === 'x' && n === 1 ? { kind: 'later', at: Date.now() + 300 } : { kind: 'done' }))
    runner.start(r.processor, 4)
    const scheduledAt = Date.now()
    await runner.schedule(job('d'), { delayMs: 250 })
    await runner.schedule(job('x'))
    t.ok(await until(() => r.runs.filter((x) => x.id === 'x').length === 2 && r.runs.some((x) => x.id === 'd')))
    const d = r.runs.find((x) => x.id === 'd')
    t.ok((d?.at ?? 0) - scheduledAt >= 240, `delayed by ${(d?.at ?? 0) - scheduledAt} ms`)
    const [first, second] = r.runs.filter((x) => x.id === 'x')
    t.ok((second?.at ?? 0) - (first?.at ?? 0) >= 280, `ran again after ${(second?.at ?? 0) - (first?.at ?? 0)} ms`)

    await runner.schedule(job('w'), { delayMs: 60_000 })
    await sleep(50)
    await runner.wake('w')
    t.ok(await until(() => r.runs.some((x) => x.id === 'w'), 3000), 'woken long before its delay')
  })

  withRunner('no more than `concurrency` run at once; the rest run as places free', async (t, runner) => {
    const r = recorder(async () => {
      await sleep(60)
      return { kind: 'done' }
    })
    runner.start(r.processor, 2)
    for (let i = 0; i < 8; i++) await runner.schedule(job(`c${i}`))
    t.ok(await until(() => r.runs.length === 8))
    t.equal(r.peak(), 2)
  })

  withRunner(
    'runnable requests start in the order they were scheduled, lower priority first',
    async (t, runner, space) => {
      let release: () => void = () => {}
      const gate = new Promise<void>((done) => {
        release = done
      })
      const r = recorder(async (id) => {
        if (id === 'block') await gate
        return { kind: 'done' }
      })
      runner.start(r.processor, 1)
      await runner.schedule(job('block'))
      // Generous bounds: at a load of 10 on two cores a worker can take seconds to start.
      t.ok(await until(() => r.runs.length === 1, 30_000), 'the blocking request runs')
      const [o1 = 'o1', o2 = 'o2', o3 = 'o3', urgent = 'urgent'] = ['o1', 'o2', 'o3', 'urgent'].map(
        (name, n) => space.spread?.(name, n) ?? name,
      )
      // Where the runner holds jobs (sharded), "the order they were scheduled" is the order it
      // took them: each is scheduled once the one before it is held, so no shard's worker can
      // take its job before an earlier one's, however slow each is under load.
      const scheduled: string[] = []
      for (const [id, priority] of [
        [o1, 10],
        [o2, 10],
        [o3, 10],
        [urgent, 1],
      ] as const) {
        await runner.schedule(job(id), { priority })
        scheduled.push(id)
        if (space.held !== undefined)
          t.ok(await space.held(scheduled, 30_000), `the runner holds ${scheduled.join(', ')} within 30 s`)
      }
      t.equal(r.runs.length, 1, 'nothing else ran while the worker was busy')
      release()
      t.ok(await until(() => r.runs.length === 5, 30_000), 'the four ran once the worker was free')
      t.same(
        r.runs.map((x) => x.id),
        ['block', urgent, o1, o2, o3],
        'the urgent one first, then the others in the order they were scheduled',
      )
    },
  )

  withRunner(
    'a claimed worker runs a held request at once, counts among the workers, and hands a "later" back (to the shared queue)',
    async (t, runner) => {
      t.equal(runner.claim(), null, 'no worker before start')
      let release: () => void = () => {}
      const gate = new Promise<void>((done) => {
        release = done
      })
      const helds: Array<Held | undefined> = []
      const r = recorder(async (id, n) => {
        if (id === 'held' && n === 1) {
          await gate
          return { kind: 'later', at: Date.now() + 100 }
        }
        return { kind: 'done' }
      })
      runner.start(async (request, signal, held) => {
        helds.push(held)
        return r.processor(request, signal)
      }, 2)
      const held = {
        request: { id: 'held' } as unknown as QueuedRequest,
        key: { id: 'key_held' } as unknown as KeyRecord,
      }
      const first = runner.claim()
      const second = runner.claim()
      t.ok(first !== null && second !== null, 'two free workers')
      t.equal(runner.claim(), null, 'and no third')
      second?.free()
      second?.free()
      const third = runner.claim()
      t.ok(third !== null, 'a freed worker can be claimed again (freed once, however often it is told)')
      t.equal(runner.claim(), null)

      // As the coordinator does (Coordinator.handBackHeld): to the shared queue.
      const handedBack: number[] = []
      first?.run(job('held'), held, async (at) => {
        handedBack.push(at)
        await runner.schedule(job('held'), { delayMs: at - Date.now() })
      })
      t.equal(r.runs.length, 1, 'it runs at once, not after a round trip')
      t.equal(helds[0], held, 'with what it was given')
      await runner.schedule(job('queued'))
      await sleep(150)
      t.notOk(
        r.runs.some((x) => x.id === 'queued'),
        'a scheduled request waits while both workers are kept',
      )
      third?.free()
      t.ok(await until(() => r.runs.some((x) => x.id === 'queued')), 'and runs once one is given back')
      release()
      t.ok(
        await until(() => r.runs.filter((x) => x.id === 'held').length === 2),
        'the "later" ran again through the shared queue',
      )
      t.equal(helds.at(-1), undefined, 'that time without the held record')
      t.equal(handedBack.length, 1, 'its "later" was handed back once')
    },
  )

  withRunner('close waits for running requests within the grace, then aborts them', async (t, runner) => {
    let aborted = false
    const processor: Processor = (_request, signal) =>
      new Promise((done) => {
        signal.addEventListener('abort', () => {
          aborted = true
          done({ kind: 'done' })
        })
      })
    runner.start(processor, 1)
    await runner.schedule(job('long'))
    await sleep(200)
    const started = Date.now()
    await runner.close(300)
    t.ok(aborted, 'the running request was told to stop')
    t.ok(Date.now() - started >= 250, 'after the grace')
  })
}
