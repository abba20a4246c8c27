// Memory at rest (issue 24): started as `npm start` starts it (with --expose-gc), the gateway
// runs one compacting collection before it listens and says so on its listening line;
// started without the flag, as the tests start it, it runs none.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'

const listening = (logs: ReadonlyArray<Record<string, unknown>>): Record<string, unknown> | undefined =>
  logs.find((line) => line.msg === 'tollgate listening')

t.test('npm start passes --expose-gc', async (t) => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    scripts: { start: string }
  }
  t.match(pkg.scripts.start, /^node .*--expose-gc.* bin\/tollgate serve$/)
})

t.test('with --expose-gc the heap is compacted before listening', async (t) => {
  const gw = await startTollgate({ execArgv: ['--expose-gc'] })
  t.teardown(() => gw.stop())
  t.equal(listening(gw.logs())?.heapCompacted, true)
})

t.test('without it, nothing is collected by hand', async (t) => {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  t.equal(listening(gw.logs())?.heapCompacted, false)
})
