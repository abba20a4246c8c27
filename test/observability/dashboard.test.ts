// Every metric a shipped dashboard queries is one the gateway exports.
import t from 'tap'
import { cacheMetrics } from '../../src/cache/metrics.ts'
import { createSemanticCache } from '../../src/cache/semantic.ts'
import { createMemorySemanticIndex } from '../../src/cache/semantic-index.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { allPanels, dashboardFiles, panelQueries, readDashboard, substitute } from '../helpers/dashboards.ts'

t.test('dashboard queries name only exported metrics', async (t) => {
  const metrics = createMetrics()
  // The response cache registers its own series when the gateway makes it, at every start.
  cacheMetrics(metrics.registry, () => 0)
  const bounds = { scopeMaxVectors: 1, scopeMaxBytes: 1, maxBytes: 1 }
  createSemanticCache(createMemorySemanticIndex(bounds), 'secret', 1, metrics)
  const exported = new Set((await metrics.registry.getMetricsAsJSON()).map((m) => m.name))
  t.ok(dashboardFiles().length > 0)
  const queries = panelQueries()
  for (const q of queries) {
    for (const name of q.expr.match(/tollgate_[a-z0-9_]+/g) ?? []) {
      const base = name.replace(/_(bucket|sum|count)$/, '')
      t.ok(exported.has(base), `${q.file} "${q.panel}" uses ${name}`)
    }
  }
  t.ok(queries.length >= 10, 'the dashboard has real queries')
})

interface Override {
  readonly matcher: { readonly id: string; readonly options: string }
  readonly properties: ReadonlyArray<{ readonly id: string; readonly value: unknown }>
}
interface Panel {
  readonly title: string
  readonly targets?: ReadonlyArray<{ readonly expr: string; readonly legendFormat?: string }>
  readonly fieldConfig?: { readonly defaults?: { readonly unit?: string }; readonly overrides?: readonly Override[] }
}

/** The unit a series is shown in: an override that matches its legend, else the panel's. */
function unitOf(panel: Panel, legend: string): string | undefined {
  for (const o of panel.fieldConfig?.overrides ?? []) {
    const matches =
      o.matcher.id === 'byName'
        ? o.matcher.options === legend
        : o.matcher.id === 'byRegexp'
          ? new RegExp(o.matcher.options.replace(/^\/(.*)\/$/, '$1')).test(legend)
          : false
    const unit = o.properties.find((p) => p.id === 'unit')?.value
    if (matches && typeof unit === 'string') return unit
  }
  return panel.fieldConfig?.defaults?.unit
}

t.test('every series is shown in its own unit; no currency is hard-coded', async (t) => {
  for (const file of dashboardFiles()) {
    // Rows' nested panels too.
    for (const panel of allPanels(readDashboard(file).panels) as Panel[]) {
      if (panel.title === undefined) continue
      t.notMatch(
        panel.fieldConfig?.defaults?.unit ?? '',
        /^currency/,
        `${panel.title}: the plans name the currency, not the dashboard`,
      )
      for (const target of panel.targets ?? []) {
        const legend = target.legendFormat ?? ''
        const unit = unitOf(panel, legend)
        const what = `${file} "${panel.title}" ${legend || target.expr}`
        // A quantile of a *_seconds histogram is a time; a rate of a counter is per second;
        // a *_bytes gauge is bytes; an event-loop lag in seconds is a time.
        if (/histogram_quantile\(.*_seconds_bucket/.test(target.expr) || /_seconds\)?$/.test(target.expr.trim()))
          t.equal(unit, 's', `${what}: seconds`)
        else if (/_bytes\)?$/.test(target.expr.trim())) t.equal(unit, 'bytes', `${what}: bytes`)
        // A rate over a rate (a hit ratio) is a share.
        else if (/\) \/ sum( by \([^)]*\))? \(rate\(/.test(target.expr))
          t.equal(unit, 'percentunit', `${what}: a share`)
        else if (/^sum( by \([^)]*\))? \(rate\(tollgate_[a-z_]+_total/.test(target.expr))
          t.ok(unit === 'reqps' || unit === 'short', `${what}: a rate (${unit})`)
      }
    }
  }
})

t.test("every query's dashboard variables are known, and filled in as Grafana fills them for All", async (t) => {
  for (const q of panelQueries()) {
    const promql = substitute(q.expr, readDashboard(q.file))
    t.notMatch(promql, /\$|\[\[/, `${q.file} "${q.panel}": no variable left`)
  }
  const dashboard = readDashboard('grafana/dashboards/tollgate-overview.json')
  t.equal(
    substitute('rate(x{model=~"$model",a=~"${model:regex}",b=~"[[model]]"}[$__rate_interval])', dashboard),
    'rate(x{model=~".*",a=~".*",b=~".*"}[1m])',
  )
  t.throws(() => substitute('rate(x{instance=~"$nosuch"}[1m])', dashboard), /unknown dashboard variable \$nosuch/)
})
