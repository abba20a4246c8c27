// TollgateStoreDown on its own, the way on-call meets it: a gateway on a Redis that is
// stopped and started again, a real Prometheus scraping it and evaluating the shipped rule
// (its `for:` shortened, or the test would wait a minute), and nobody calling /readyz (the
// Dockerfile's health check polls /healthz). tollgate_store_up follows the connection the
// log speaks of, so the alert fires during the outage and clears after it.
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { closedPort, startTollgate } from '../helpers/gateway.ts'
import { eventually, startPrivateRedis, testPrefix } from '../limits/helpers.ts'

const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus'
const DOCS_URL = 'https://git.example.com/platform/tollgate/-/blob/main/docs'

const found = spawnSync(PROMETHEUS, ['--version'], { stdio: 'ignore' })
// CI installs Prometheus (Debian package `prometheus`); without it this test fails, it never skips.
t.equal(found.status, 0, `${PROMETHEUS} is installed`, {
  howToFix: 'apt-get install prometheus, or set PROMETHEUS_BIN to its path. bash .ci/run installs it.',
})

const redis = await startPrivateRedis()
t.teardown(() => redis.kill())
const gw = await startTollgate({
  env: { REDIS_URL: `redis://127.0.0.1:${redis.port}`, TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') },
  config: (doc) => {
    ;(doc.store as Record<string, unknown>).keyPrefix = testPrefix()
  },
})
t.teardown(() => gw.stop('SIGKILL'))

/** The gauge as the metrics listener serves it now. */
async function storeUp(): Promise<number | undefined> {
  const text = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  const value = /^tollgate_store_up (\S+)$/m.exec(text)?.[1]
  return value === undefined ? undefined : Number(value)
}

const readyzCalls = (): number => gw.logs().filter((l) => l.route === 'readyz').length

t.test('the gauge follows the connection, without /readyz', async (t) => {
  t.equal(await storeUp(), 1, 'up while Redis is')
  await redis.kill()
  t.ok(await eventually(async () => (await storeUp()) === 0, 200, 50), '0 once the connection is lost')
  t.ok(
    gw.logs().some((l) => String(l.msg).startsWith('Redis unreachable at ')),
    'when the log says the outage started',
  )
  await redis.start()
  t.ok(await eventually(async () => (await storeUp()) === 1, 200, 50), '1 again once it is back')
  t.ok(gw.logs().some((l) => String(l.msg).startsWith('Redis reachable again at ')))
  t.equal(readyzCalls(), 0, 'nobody asked /readyz')
})

t.test('a real Prometheus fires TollgateStoreDown during an outage and clears it after', async (t) => {
  if (found.status !== 0) return
  const dir = mkdtempSync(join(tmpdir(), 'tg-prom-alert-'))
  const shipped = parse(readFileSync('config/alerts.yml', 'utf8')) as {
    groups: Array<{ name: string; rules: Array<{ alert?: string; for?: string }> }>
  }
  const groups = shipped.groups
    .map((g) => ({
      ...g,
      rules: g.rules.filter((r) => r.alert === 'TollgateStoreDown').map((r) => ({ ...r, for: '2s' })),
    }))
    .filter((g) => g.rules.length > 0)
  t.equal(groups.length, 1, 'the shipped rule')
  writeFileSync(join(dir, 'alerts.yml'), stringify({ groups }))
  writeFileSync(
    join(dir, 'prometheus.yml'),
    stringify({
      global: {
        scrape_interval: '500ms',
        evaluation_interval: '500ms',
        external_labels: { tollgate_docs_url: DOCS_URL },
      },
      rule_files: [join(dir, 'alerts.yml')],
      scrape_configs: [{ job_name: 'tollgate', static_configs: [{ targets: [new URL(gw.metricsUrl).host] }] }],
    }),
  )
  const port = await closedPort()
  const prom = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  )
  t.teardown(() => {
    prom.kill('SIGKILL')
  })
  const query = async (q: string): Promise<number | null> => {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`)
      const body = (await res.json()) as { data?: { result?: Array<{ value: [number, string] }> } }
      const value = body.data?.result?.[0]?.value[1]
      return value === undefined ? null : Number(value)
    } catch {
      return null
    }
  }
  const firing = 'count(ALERTS{alertname="TollgateStoreDown",alertstate="firing"})'
  t.ok(await eventually(async () => (await query('tollgate_store_up')) === 1, 120, 250), 'scraped, up')

  await redis.kill()
  t.ok(await eventually(async () => (await query(firing)) === 1, 120, 250), 'the alert fires')
  const alerts = (await (await fetch(`http://127.0.0.1:${port}/api/v1/alerts`)).json()) as {
    data: { alerts: Array<{ labels: Record<string, string>; annotations: Record<string, string> }> }
  }
  t.equal(
    alerts.data.alerts.find((a) => a.labels.alertname === 'TollgateStoreDown')?.annotations.runbook,
    `${DOCS_URL}/operating.md#tollgatestoredown`,
    'its runbook is a link from the docs base URL Prometheus was given',
  )
  await redis.start()
  t.ok(await eventually(async () => (await query(firing)) === null, 120, 250), 'and clears by itself')
  t.equal(readyzCalls(), 0, 'nobody asked /readyz')
})
