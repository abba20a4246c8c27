// The snapshot file alone (src/limits/snapshot.ts): a first start finds none and says
// nothing, close writes the counters whole, and a place it cannot write is logged, not thrown.
// (The counters' round trip through a restart is in memory.test.ts.)
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { memoryCounters } from '../../src/limits/memory-counters.ts'
import { keepSnapshots } from '../../src/limits/snapshot.ts'
import { captureLog } from './helpers.ts'

const HOUR = 3_600_000

t.test('a first start reads no file and logs nothing; close writes the counters', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-snapshot-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'nested', 'limits.json')
  const logs = captureLog()
  const memory = memoryCounters(60_000)
  const snapshots = keepSnapshots(memory, { file, everyMs: HOUR, log: logs.log })
  t.same(logs.lines(), [], 'a missing file is a first start')
  await memory.settle({ keyId: 'k', model: 'm' }, [
    { name: 'quota', windowed: false, delta: 7, reserved: 0, expiresAt: 0 },
  ])
  await snapshots.close()
  const restored = memoryCounters(60_000)
  restored.restore(JSON.parse(readFileSync(file, 'utf8')))
  t.same(
    restored.drainLifetime(),
    [{ subject: { keyId: 'k', model: 'm' }, name: 'quota', used: 7 }],
    'the counters as they stood at close',
  )
})

t.test('a file it cannot write is logged and the counters stay in memory', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-snapshot-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const blocker = join(dir, 'not-a-dir')
  writeFileSync(blocker, '')
  const logs = captureLog()
  const snapshots = keepSnapshots(memoryCounters(60_000), {
    file: join(blocker, 'limits.json'),
    everyMs: HOUR,
    log: logs.log,
  })
  await snapshots.close()
  t.ok(logs.lines().some((l) => l.msg === 'rate limiter could not save its counters'))
})
