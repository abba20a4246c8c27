// A budget's spend survives a crash on the embedded store: a gateway killed with SIGKILL
// right after its calls, before its counters' snapshot (limits.json, every 10 s) could keep
// them, restarts on the same data directory with every call it charged still spent, and
// refuses the calls beyond the budget. Calls are priced by a key override so that their
// cost is exact: only output tokens cost (0.001 EUR each), and the mock writes exactly
// max_tokens of them.
import t from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const MODEL = 'gpt-oss-120b'
/** One call: 10 output tokens at 1,000 EUR per million = 0.01 EUR. */
const MAX_TOKENS = 10
const PRICED = {
  '*': { input_price: 0, output_price: 1000, rpm: 1_000_000, input_tpm: 1_000_000_000, output_tpm: 1_000_000_000 },
}

async function admin(gw: RunningTollgate, method: string, path: string, body?: unknown): Promise<unknown> {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return res.json()
}

async function call(gw: RunningTollgate, key: string): Promise<{ status: number; code?: string }> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: MAX_TOKENS, messages: [{ role: 'user', content: 'hi' }] }),
  })
  const body = (await res.json()) as { error?: { code?: string } }
  return { status: res.status, ...(body.error?.code === undefined ? {} : { code: body.error.code }) }
}

t.test(
  'embedded: SIGKILL between two snapshots loses no budget spend; a restart refuses beyond the budget',
  async (t) => {
    const first = await startTollgate()
    const { key, id } = await first.createKey({ tier: 'Standard4000', owner: 'ada', limits: PRICED })
    await admin(first, 'PUT', `/admin/budgets/key/${id}`, { amount: 0.05, period: 'month', time_zone: 'Europe/Berlin' })

    const before = []
    for (let i = 0; i < 3; i++) before.push((await call(first, key)).status)
    t.same(before, [200, 200, 200], 'three calls of 0.01 EUR each, charged')
    first.child.kill('SIGKILL')
    await new Promise((exited) => first.child.once('exit', exited))
    // The snapshot is written every 10 s: whether one ran after the calls is up to the clock.
    // Without it, the worst case of a crash (every call since the last snapshot) is tested.
    rmSync(join(first.dataDir, 'limits.json'), { force: true })

    const second = await startTollgate({ dataDir: first.dataDir, adminToken: first.adminToken })
    t.teardown(() => second.stop())
    t.match(
      await admin(second, 'GET', `/admin/keys/${id}/usage`),
      { budgets: [{ scope: 'key', id, spent: 0.03, remaining: 0.02 }] },
      'every call charged before the kill is still spent',
    )
    const after = []
    for (let i = 0; i < 3; i++) after.push(await call(second, key))
    t.same(
      after,
      [{ status: 200 }, { status: 200 }, { status: 429, code: 'insufficient_quota' }],
      'what is left is spent, and the call beyond the budget is refused',
    )
    t.match(
      await admin(second, 'GET', `/admin/keys/${id}/usage`),
      { budgets: [{ scope: 'key', id, spent: 0.05, remaining: 0 }] },
      'never overspent',
    )
  },
)
