// Live configuration on a running gateway (issue #26): while a load runs, a reload raises a
// tier's rpm and adds a deployment on a new backend; the limits switch at the reload, the new
// deployment takes traffic, and no call fails. A file with a bad field is refused with the
// field's path and the gateway goes on serving on the configuration it runs; a file that
// changes settings only a restart applies is refused naming them. The gateway is a real
// process (SIGHUP and POST /admin/reload, as an operator sends them), the load raw HTTP.
import { createHash } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { startTollgate, startUpstream, type RunningTollgate } from '../helpers/gateway.ts'
import { chatWith } from '../helpers/http.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'

const MODEL = 'gpt-oss-120b'

/** Plans of one tier whose only limit is `rpm` on every model. */
const plansWith = (rpm: number): Record<string, unknown> => ({
  defaultTier: 'Basic',
  tiers: { Basic: { default: { rpm, tpm: 10_000_000 } } },
})

function rewrite(gw: RunningTollgate, change: (doc: Record<string, unknown>) => void): string {
  const doc = parse(readFileSync(gw.configPath, 'utf8')) as Record<string, unknown>
  change(doc)
  const text = stringify(doc)
  writeFileSync(gw.configPath, text)
  return createHash('sha256').update(text).digest('hex')
}

const model = (doc: Record<string, unknown>): { deployments: Array<Record<string, unknown>> } =>
  (doc.models as Array<{ name: string; deployments: Array<Record<string, unknown>> }>).find((m) => m.name === MODEL)!

interface ReloadReply {
  readonly status: number
  readonly json: Record<string, unknown> & { error: { code: string; param: string | null; message: string } }
}

async function adminReload(gw: RunningTollgate, body: unknown = {}): Promise<ReloadReply> {
  const res = await fetch(`${gw.url}/admin/reload`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.status, json: (await res.json()) as ReloadReply['json'] }
}

async function configInForce(gw: RunningTollgate): Promise<{ hash: string }> {
  const res = await fetch(`${gw.url}/admin/config`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  return (await res.json()) as { hash: string }
}

/** One call of the load: when it was sent and when its answer had arrived, on this process's clock. */
interface Call {
  readonly startedAt: number
  readonly endedAt: number
  readonly status: number
  readonly limit: string | null
}

t.test('a reload under load: the rpm and the deployments switch, no call fails', async (t) => {
  const upstream = await startUpstream()
  t.teardown(() => upstream.stop())
  const gw = await startTollgate({
    config: (doc) => {
      doc.plans = plansWith(100_000)
    },
  })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey()

  const calls: Call[] = []
  let running = true
  const worker = async (): Promise<void> => {
    while (running) {
      const startedAt = performance.now()
      const res = await chatWith(gw.url, key, MODEL, 3)
      await res.arrayBuffer()
      calls.push({
        startedAt,
        endedAt: performance.now(),
        status: res.status,
        limit: res.headers.get('x-ratelimit-limit-requests'),
      })
    }
  }
  const load = Promise.all([worker(), worker(), worker(), worker()])
  try {
    t.ok(
      (
        await pollUntil(
          async () => calls.length,
          (n) => n >= 40,
        )
      ).met,
      'the load runs on the boot configuration',
    )
    const upstreamBefore = (await upstream.requests()).length
    const hash = rewrite(gw, (doc) => {
      doc.plans = plansWith(200_000)
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      model(doc).deployments.push({ backend: 'up', weight: 3 })
    })
    const sentAt = performance.now()
    gw.child.kill('SIGHUP')
    const applied = await pollUntil(
      async () => gw.logs().find((l) => l.msg === 'configuration reload: applied'),
      (line) => line !== undefined,
    )
    const appliedAt = performance.now()
    t.ok(applied.met, 'SIGHUP: the reload is logged as applied')
    t.equal(applied.value?.hash, hash, "the log line carries the new file's sha256")
    t.same(applied.value?.changed, ['plans', 'models', 'backends'], 'and the sections that changed')
    const before = calls.length
    t.ok(
      (
        await pollUntil(
          async () => calls.length,
          (n) => n >= before + 60,
        )
      ).met,
      'the load goes on after it',
    )

    running = false
    await load
    t.same(
      calls.filter((c) => c.status !== 200),
      [],
      `no call of ${calls.length} failed`,
    )
    // A call sent before the SIGHUP may still be read by the gateway after the reload (under load
    // it waits in the socket): only a call answered before the signal is sure to be on the old file.
    const done = calls.filter((c) => c.endedAt < sentAt)
    const after = calls.filter((c) => c.startedAt > appliedAt)
    t.ok(done.length >= 40 && after.length >= 40, `${done.length} calls before the reload, ${after.length} after`)
    t.same(new Set(done.map((c) => c.limit)), new Set(['100000']), 'before: the old rpm')
    t.same(new Set(after.map((c) => c.limit)), new Set(['200000']), 'after: the new rpm, on every call')
    t.equal(upstreamBefore, 0, 'the new deployment had no traffic before')
    const reached = (await upstream.requests()).filter((r) => r.path === '/v1/chat/completions').length
    t.ok(reached > 0, `the new deployment receives traffic after the reload (${reached} calls)`)

    t.equal((await configInForce(gw)).hash, hash, 'GET /admin/config names the new file')
    t.equal(await counterSum(gw, 'tollgate_config_reloads_total', { outcome: 'applied' }), 1, 'counted')
    t.equal(await counterSum(gw, 'tollgate_config_info', { hash }), 1, 'the info gauge carries the hash')
    t.equal(await counterSum(gw, 'tollgate_config_last_reload_successful'), 1)

    // Unchanged: the same file again.
    const again = await adminReload(gw)
    t.equal(again.status, 200)
    t.match(again.json, { object: 'config.reload', outcome: 'unchanged', hash, file_hash: hash })
  } finally {
    running = false
    await load
  }
})

t.test('a bad file is refused with the field path; the gateway goes on serving on the old one', async (t) => {
  const gw = await startTollgate({
    config: (doc) => {
      doc.plans = plansWith(700)
    },
  })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey()
  const running = await configInForce(gw)

  const badHash = rewrite(gw, (doc) => {
    doc.plans = plansWith(900)
    model(doc).deployments.push({ backend: 'nowhere' })
  })
  const refused = await adminReload(gw)
  t.equal(refused.status, 422, 'refused')
  t.equal(refused.json.error.code, 'config_invalid')
  t.equal(refused.json.error.param, 'models.0.deployments.1.backend', 'the bad field, by its path')
  t.match(refused.json.error.message, /models\.0\.deployments\.1\.backend: unknown backend "nowhere"/)
  t.match(refused.json.error.message, running.hash, 'and the hash still in force')

  const res = await chatWith(gw.url, key, MODEL, 3)
  t.equal(res.status, 200, 'the gateway still serves')
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '700', 'on the configuration it ran')
  await res.arrayBuffer()
  t.equal((await configInForce(gw)).hash, running.hash)
  t.equal(await counterSum(gw, 'tollgate_config_reloads_total', { outcome: 'invalid' }), 1)
  t.equal(await counterSum(gw, 'tollgate_config_last_reload_successful'), 0)
  const line = gw.logs().find((l) => l.outcome === 'invalid')
  t.match(line, { level: 40, hash: running.hash, fileHash: badHash }, 'logged with both hashes')

  // A SIGHUP with a file that is not YAML at all: refused the same way, still serving.
  writeFileSync(gw.configPath, 'models: [unclosed\n')
  gw.child.kill('SIGHUP')
  t.ok(
    (
      await pollUntil(
        async () => gw.logs().filter((l) => l.outcome === 'invalid').length,
        (n) => n === 2,
      )
    ).met,
    'a second refusal logged',
  )
  t.match(gw.logs().filter((l) => l.outcome === 'invalid')[1]?.problems, [/not valid YAML/])
  t.equal((await chatWith(gw.url, key, MODEL, 3)).status, 200, 'still serving')
})

t.test('a file that changes restart-only settings is refused, naming them', async (t) => {
  const gw = await startTollgate({ config: (doc) => void (doc.plans = plansWith(700)) })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey()
  rewrite(gw, (doc) => {
    doc.plans = plansWith(900)
    ;(doc.server as Record<string, unknown>).headersTimeoutMs = 12_345
    ;(doc.store as Record<string, unknown>).keyPrefix = 'other:'
  })
  const refused = await adminReload(gw)
  t.equal(refused.status, 409)
  t.equal(refused.json.error.code, 'config_restart_required')
  t.equal(refused.json.error.param, 'server.headersTimeoutMs')
  t.match(refused.json.error.message, /server\.headersTimeoutMs: changed, but only a restart applies it/)
  t.match(refused.json.error.message, /store\.keyPrefix: changed/)
  const res = await chatWith(gw.url, key, MODEL, 3)
  t.equal(res.headers.get('x-ratelimit-limit-requests'), '700', 'nothing of the file was applied')
  await res.arrayBuffer()
  t.equal(await counterSum(gw, 'tollgate_config_reloads_total', { outcome: 'restart_required' }), 1)
})

t.test("a reload puts a tier's budget and the plans' currency in force on the next call", async (t) => {
  // Issue #36: the budget book read the plans once at boot, so a reload reported `plans`
  // applied while the tier's budget (an emergency cut to 0 above all) changed nothing.
  const plans = (amount: number, currency: string, rpm: number): Record<string, unknown> => ({
    defaultTier: 'Basic',
    currency,
    tiers: {
      Basic: {
        budget: { amount, period: 'month' },
        default: { rpm, tpm: 10_000_000, input_price: 1, output_price: 1 },
      },
    },
  })
  const gw = await startTollgate({ config: (doc) => void (doc.plans = plans(100, 'EUR', 1000)) })
  t.teardown(() => gw.stop())
  const { key, id } = await gw.createKey()
  const budgetsOfKey = async (): Promise<Array<Record<string, unknown>>> => {
    const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, {
      headers: { authorization: `Bearer ${gw.adminToken}` },
    })
    return ((await res.json()) as { budgets: Array<Record<string, unknown>> }).budgets
  }
  const before = await chatWith(gw.url, key, MODEL, 3)
  t.equal(before.status, 200)
  await before.arrayBuffer()
  t.match(await budgetsOfKey(), [{ origin: 'plan', amount: 100, currency: 'EUR' }])

  rewrite(gw, (doc) => void (doc.plans = plans(0, 'USD', 999)))
  const cut = await adminReload(gw)
  t.equal(cut.json.outcome, 'applied')
  t.same(cut.json.changed, ['plans'])
  const refused = await chatWith(gw.url, key, MODEL, 3)
  const body = (await refused.json()) as { error: { code: string; message: string } }
  t.equal(refused.status, 429, 'the cut budget refuses the next call')
  t.equal(body.error.code, 'insufficient_quota')
  t.match(body.error.message, /0\.00 USD per month/, "the refusal speaks the plans' new currency")
  t.match(await budgetsOfKey(), [{ origin: 'plan', amount: 0, currency: 'USD' }], 'the admin API shows the new budget')

  rewrite(gw, (doc) => void (doc.plans = plans(50, 'USD', 999)))
  t.equal((await adminReload(gw)).json.outcome, 'applied')
  const after = await chatWith(gw.url, key, MODEL, 3)
  t.equal(after.status, 200, 'a budget raised by a reload admits at once')
  t.equal(after.headers.get('x-ratelimit-limit-requests'), '999')
  await after.arrayBuffer()
  t.match(await budgetsOfKey(), [{ origin: 'plan', amount: 50, currency: 'USD' }])
})
