// Every metric a shipped dashboard queries is one the gateway exports.
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { createMetrics } from '../../src/observability/metrics.ts'

t.test('dashboard queries name only exported metrics', async (t) => {
  const metrics = createMetrics()
  const exported = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name))
  const files = readdirSync('grafana/dashboards').filter((f) => f.endsWith('.json'))
  t.ok(files.length > 0)
  let queries = 0
  for (const file of files) {
    const dashboard = JSON.parse(readFileSync(`grafana/dashboards/${file}`, 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> }
    for (const panel of dashboard.panels) {
      for (const target of panel.targets ?? []) {
        queries++
        for (const name of target.expr.match(/tollgate_[a-z0-9_]+/g) ?? []) {
          const base = name.replace(/_(bucket|sum|count)$/, '')
          t.ok(exported.has(base), `${file} "${panel.title}" uses ${name}`)
        }
      }
    }
  }
  t.ok(queries >= 10, 'the dashboard has real queries')
})
