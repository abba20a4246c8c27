// A real Prometheus scrapes a running Tollgate and sees its traffic, tokens and errors.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { closedPort, startTollgate } from '../helpers/gateway.ts'
import { freshKeyClient } from '../helpers/sdk-gateway.ts'

const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus'

t.test('Prometheus scrapes the metrics listener', async (t) => {
  const found = spawnSync(PROMETHEUS, ['--version'], { stdio: 'ignore' })
  // CI installs Prometheus (Debian package `prometheus`); without it this test fails, it never skips.
  t.equal(found.status, 0, `${PROMETHEUS} is installed`, {
    howToFix:
      'Install it (Debian/Ubuntu: apt-get install prometheus; elsewhere a release binary on the PATH), or set PROMETHEUS_BIN to its path. bash .ci/run installs it.',
  })
  if (found.status !== 0) return

  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  const client = await freshKeyClient(gw)
  for (let i = 0; i < 3; i++) {
    await client.chat.completions.create({
      model: 'Mistral-Small-24B-Instruct-2501',
      messages: [{ role: 'user', content: `hello ${i}` }],
      max_tokens: 5,
    })
  }
  await t.rejects(client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }))

  const dir = mkdtempSync(join(tmpdir(), 'tg-prom-'))
  const target = new URL(gw.metricsUrl).host
  writeFileSync(
    join(dir, 'prometheus.yml'),
    `global: { scrape_interval: 1s }\nscrape_configs:\n  - job_name: tollgate\n    static_configs: [{ targets: ["${target}"] }]\n`,
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
  let ok: number | null = null
  for (let i = 0; i < 60 && ok === null; i++) {
    await new Promise((r) => setTimeout(r, 500))
    ok = await query('sum(tollgate_requests_total{status="200",endpoint="chat.completions"})')
  }
  t.equal(ok, 3, 'three successful chat completions scraped')
  t.equal(await query('sum(tollgate_requests_total{status="404"})'), 1, 'the unknown model counted as 404')
  const input = await query('sum(tollgate_tokens_total{direction="input",model="Mistral-Small-24B-Instruct-2501"})')
  t.ok(input !== null && input > 0, 'input tokens exported')
  const output = await query('sum(tollgate_tokens_total{direction="output"})')
  t.ok(output !== null && output > 0 && output <= 15, 'output tokens exported (max 5 per call)')
  t.equal(await query('min(tollgate_store_up)'), 1)
  t.equal(await query('up{job="tollgate"}'), 1, 'target up')
})
