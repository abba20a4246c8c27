// The alerting rules we ship (config/alerts.yml): promtool accepts them, its unit tests
// (alerts.test.yml) show each alert firing and resolving, every rule carries what on-call
// needs (for, severity, summary, description, a runbook section that exists), and the
// docker-compose stack loads the file.
import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { parse } from 'yaml'
import { anchorsOf } from '../docs/markdown.ts'

const PROMTOOL = process.env.PROMTOOL_BIN ?? 'promtool'

interface Rule {
  readonly alert?: string
  readonly expr: string
  readonly for?: string
  readonly labels?: Record<string, string>
  readonly annotations?: Record<string, string>
}
const rules = (parse(readFileSync('config/alerts.yml', 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap(
  (g) => g.rules,
)

const promtool = (args: string[]): { status: number | null; out: string } => {
  const run = spawnSync(PROMTOOL, args, { encoding: 'utf8' })
  return { status: run.status, out: `${run.stdout}${run.stderr}` }
}

t.test('promtool checks the rules and runs their unit tests', async (t) => {
  // promtool comes with Debian's prometheus package, which .ci/run installs; without it this fails, never skips.
  const found = spawnSync(PROMTOOL, ['--version'], { stdio: 'ignore' })
  t.equal(found.status, 0, `${PROMTOOL} is installed`, {
    howToFix: 'apt-get install prometheus (it brings promtool), or set PROMTOOL_BIN. bash .ci/run installs it.',
  })
  if (found.status !== 0) return
  const check = promtool(['check', 'rules', 'config/alerts.yml'])
  t.equal(check.status, 0, check.out)
  t.match(check.out, new RegExp(`SUCCESS: ${rules.length} rules found`))
  const unit = promtool(['test', 'rules', 'test/observability/alerts.test.yml'])
  t.equal(unit.status, 0, unit.out)
  t.match(unit.out, /SUCCESS/)
})

t.test('promtool test rules fails when an alert does not fire as the test says', async (t) => {
  // The unit tests can fail: the same file with one firing expectation removed is refused.
  const text = readFileSync('test/observability/alerts.test.yml', 'utf8')
  const broken = text.replace(/exp_alerts:\n(\s+- exp_labels:)/, 'exp_alerts: []\n#$1')
  t.not(broken, text)
  const { mkdtempSync, writeFileSync, mkdirSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join, resolve } = await import('node:path')
  const dir = mkdtempSync(join(tmpdir(), 'tg-alerts-'))
  mkdirSync(join(dir, 'x', 'y'), { recursive: true })
  const file = join(dir, 'x', 'y', 'alerts.test.yml')
  writeFileSync(file, broken.replace('../../config/alerts.yml', resolve('config/alerts.yml')))
  const unit = promtool(['test', 'rules', file])
  t.not(unit.status, 0, 'a wrong expectation fails')
  t.match(unit.out, /FAILED/)
})

t.test('every alert says how bad, how long, what and where to look', async (t) => {
  const runbook = anchorsOf(readFileSync('docs/operating.md', 'utf8'))
  const unitTests = readFileSync('test/observability/alerts.test.yml', 'utf8')
  t.ok(rules.length >= 6, 'the alerts on-call needs')
  for (const rule of rules) {
    const name = rule.alert ?? '(a recording rule)'
    t.ok(rule.alert, `${name}: alerting rules only`)
    t.match(rule.for ?? '', /^\d+[smh]$/, `${name}: a for:`)
    t.ok(['critical', 'warning'].includes(rule.labels?.severity ?? ''), `${name}: severity critical or warning`)
    t.ok(rule.annotations?.summary, `${name}: a summary`)
    t.ok(rule.annotations?.description, `${name}: a description`)
    // A link from the docs base URL Prometheus is given (docs/operating.md#alerts), else the repository path.
    const anchor = /^\{\{ or \$externalLabels\.tollgate_docs_url "docs" \}\}\/operating\.md#([\w-]+)$/.exec(
      rule.annotations?.runbook ?? '',
    )?.[1]
    t.ok(
      anchor !== undefined && runbook.has(anchor),
      `${name}: its runbook section exists (${rule.annotations?.runbook})`,
    )
    // Fires and resolves in the unit tests: an expected alert, and an empty expectation after it.
    const cases = unitTests.split(/\n {6}- eval_time: /).filter((c) => c.includes(`alertname: ${name}\n`))
    t.ok(
      cases.some((c) => /exp_alerts:\n\s+- exp_labels:/.test(c)),
      `${name}: a unit test where it fires`,
    )
    t.ok(
      cases.some((c) => /exp_alerts: \[\]/.test(c)),
      `${name}: a unit test where it does not (or no longer) fire`,
    )
  }
  // What on-call asked for, by the metric each watches.
  const exprs = rules.map((r) => r.expr).join('\n')
  for (const metric of [
    'tollgate_requests_total{status=~"5.."}',
    'tollgate_gateway_overhead_seconds_bucket',
    'tollgate_limiter_mode',
    'tollgate_queue_oldest_wait_seconds',
    'tollgate_upstream_refusals_total',
    'tollgate_deployment_cooling_down',
    'tollgate_jwt_signing_key_expiry_timestamp_seconds',
  ])
    t.ok(exprs.includes(metric), `an alert watches ${metric}`)
})

t.test('the docker-compose Prometheus loads the rules', async (t) => {
  const prometheus = parse(readFileSync('config/prometheus.yml', 'utf8')) as { rule_files?: string[] }
  t.same(prometheus.rule_files, ['/etc/prometheus/alerts.yml'])
  const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as {
    services: { prometheus: { volumes: string[] } }
  }
  t.ok(
    compose.services.prometheus.volumes.includes('./config/alerts.yml:/etc/prometheus/alerts.yml:ro'),
    'mounted where prometheus.yml says',
  )
})
