// `tollgate budgets …` against a running gateway, as an operator runs it: set, list, show,
// clear; tables by default, --json for scripts, and the gateway's own words when it refuses.
import t from 'tap'
import { runTollgate } from '../helpers/cli.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const tollgate = runTollgate

let gw: RunningTollgate
let env: Record<string, string>
t.before(async () => {
  gw = await startTollgate()
  env = { TOLLGATE_URL: gw.url, TOLLGATE_ADMIN_TOKEN: gw.adminToken }
})
t.teardown(() => gw.stop())

t.test('set, list, show and clear budgets from the command line', async (t) => {
  const { id } = await gw.createKey({ tier: 'Basic', owner: 'cli-team' })
  const set = await tollgate(
    ['budgets', 'set', 'key', id, '--amount', '25', '--period', 'month', '--time-zone', 'Europe/Berlin'],
    env,
  )
  t.equal(set.code, 0, set.stderr)
  t.match(set.stdout, /SCOPE\s+ID\s+PERIOD\s+TIME ZONE\s+AMOUNT \(EUR\)\s+SPENT\s+HELD\s+LEFT\s+RESETS AT\s+FROM/)
  t.match(
    set.stdout,
    new RegExp(`key\\s+${id}\\s+month\\s+Europe/Berlin\\s+25\\.00\\s+0\\.00\\s+0\\.00\\s+25\\.00\\s+\\S+\\s+set`),
  )
  const owner = await tollgate(
    ['budgets', 'set', 'owner', 'cli-team', '--amount', '100', '--period', 'week', '--thresholds', '75,90'],
    env,
  )
  t.equal(owner.code, 0, owner.stderr)

  const list = await tollgate(['budgets', 'list'], env)
  t.match(list.stdout, /owner\s+cli-team\s+week\s+UTC\s+100\.00/)
  t.match(list.stdout, new RegExp(`key\\s+${id}\\s+month`))
  const json = JSON.parse((await tollgate(['budgets', 'list', '--json'], env)).stdout) as {
    data: Array<{ scope: string; thresholds: number[] }>
  }
  t.same(json.data.find((b) => b.scope === 'owner')?.thresholds, [75, 90])

  // What a key's calls are charged against: its own (not the tier's default) and its owner's.
  const show = await tollgate(['budgets', 'show', id], env)
  t.match(show.stdout, new RegExp(`key\\s+${id}\\s+month`))
  t.match(show.stdout, /owner\s+cli-team\s+week/)
  const clear = await tollgate(['budgets', 'clear', 'key', id], env)
  t.equal(clear.code, 0)
  t.match(clear.stdout, `Cleared the budget of key ${id}.`)
  const fallback = await tollgate(['budgets', 'show', id], env)
  t.match(
    fallback.stdout,
    new RegExp(`key\\s+${id}\\s+month\\s+UTC\\s+100\\.00.*tier default`),
    "the Basic tier's default again",
  )

  const bad = await tollgate(['budgets', 'set', 'tenant', 'acme', '--amount', '5', '--period', 'fortnight'], env)
  t.equal(bad.code, 1)
  t.match(bad.stderr, /period/)
  const missing = await tollgate(['budgets', 'set', 'tenant', 'acme', '--period', 'day'], env)
  t.equal(missing.code, 64)
  t.match(missing.stderr, '--amount is needed')
  const none = await tollgate(['budgets', 'clear', 'tenant', 'nobody'], env)
  t.equal(none.code, 1)
  t.match(none.stderr, 'No budget is set on tenant nobody')
  const help = await tollgate(['budgets', 'help'], {})
  t.match(help.stdout, 'Usage: tollgate budgets <command>')
})
