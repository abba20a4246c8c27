// The shipped Grafana dashboards as the tests read them: every dashboard JSON under
// grafana/, every panel (a row's nested panels too), every target's PromQL, and that PromQL
// with Grafana's variables replaced the way Grafana would fill them in for "All".
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'

const ROOT = resolve(import.meta.dirname, '../..')

export interface Panel {
  readonly title?: string
  readonly type?: string
  readonly targets?: ReadonlyArray<{ readonly expr?: string; readonly legendFormat?: string; readonly refId?: string }>
  readonly fieldConfig?: { readonly defaults?: { readonly unit?: string }; readonly overrides?: readonly unknown[] }
  /** A row's panels (a collapsed row keeps them here). */
  readonly panels?: readonly Panel[]
}

interface Variable {
  readonly name: string
  readonly type?: string
  readonly includeAll?: boolean
  readonly allValue?: string | null
  readonly current?: { readonly value?: unknown }
  readonly options?: ReadonlyArray<{ readonly value?: unknown }>
}

export interface Dashboard {
  readonly panels: readonly Panel[]
  readonly templating?: { readonly list?: readonly Variable[] }
}

/** One target of one panel: where it is, and its PromQL as written. */
export interface PanelQuery {
  readonly file: string
  readonly panel: string
  readonly legend: string
  readonly expr: string
}

/** Every dashboard JSON under grafana/ (relative to the repository), provisioning files aside. */
export function dashboardFiles(dir = join(ROOT, 'grafana')): string[] {
  const found: string[] = []
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) found.push(...dashboardFiles(path))
    else if (name.endsWith('.json')) found.push(relative(ROOT, path))
  }
  return found.sort()
}

export function readDashboard(file: string): Dashboard {
  return JSON.parse(readFileSync(join(ROOT, file), 'utf8')) as Dashboard
}

/** Every panel, depth first: rows and the panels inside them. */
export function allPanels(panels: readonly Panel[]): Panel[] {
  return panels.flatMap((p) => [p, ...allPanels(p.panels ?? [])])
}

/** Every PromQL target of every panel of every dashboard. */
export function panelQueries(): PanelQuery[] {
  return dashboardFiles().flatMap((file) =>
    allPanels(readDashboard(file).panels).flatMap((panel) =>
      (panel.targets ?? []).flatMap((target) =>
        target.expr === undefined || target.expr.trim() === ''
          ? []
          : [{ file, panel: panel.title ?? '(untitled)', legend: target.legendFormat ?? '', expr: target.expr }],
      ),
    ),
  )
}

/**
 * Grafana's built-in interval variables, for a Prometheus that scrapes every second:
 * Grafana's $__rate_interval is at least four scrapes; a minute is wide enough on any graph.
 */
const BUILT_IN: Readonly<Record<string, string>> = {
  __rate_interval: '1m',
  __interval: '15s',
  __interval_ms: '15000',
  __range: '5m',
  __range_s: '300',
  __range_ms: '300000',
}

/** What a dashboard variable stands for when every value is chosen ("All"), or its current value. */
function valueOf(v: Variable): string {
  if (v.includeAll === true) return v.allValue ?? '.*'
  const current = v.current?.value ?? v.options?.[0]?.value
  if (typeof current === 'string' && current !== '$__all') return current
  // A query variable with no "All": any value matches the regex it is used in.
  return '.*'
}

/** The PromQL Grafana would send: $var, ${var}, ${var:format} and [[var]] replaced. */
export function substitute(expr: string, dashboard: Dashboard): string {
  const values = new Map<string, string>(Object.entries(BUILT_IN))
  for (const v of dashboard.templating?.list ?? []) values.set(v.name, valueOf(v))
  const replaced = expr.replace(
    /\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)/g,
    (whole, braced: string | undefined, bracketed: string | undefined, bare: string | undefined) => {
      const name = braced ?? bracketed ?? bare ?? ''
      return values.get(name) ?? whole
    },
  )
  const left = /\$\{?\w+|\[\[\w+\]\]/.exec(replaced)
  if (left !== null) throw new Error(`unknown dashboard variable ${left[0]} in ${expr}`)
  return replaced
}
