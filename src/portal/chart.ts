// Server-drawn SVG bar charts: no script, no library, nothing but numbers and axis labels
// the code formats itself (escaped anyway). Presentation attributes only: the CSP allows no
// inline style.
import { escapeHtml, raw, type Html } from './html.ts'

export interface Series {
  readonly name: string
  readonly colour: string
  readonly values: readonly number[]
}

const W = 760
const H = 240
const PAD = { left: 64, right: 12, top: 14, bottom: 44 }
/** Label size in the chart's units: about 11 px where a phone shows the chart at its narrowest (portal.css). */
const FONT = 13

/** A rounded maximum for the axis: 1, 2 or 5 times a power of ten. */
function niceMax(value: number): number {
  if (value <= 0) return 1
  const power = 10 ** Math.floor(Math.log10(value))
  for (const step of [1, 2, 5, 10]) if (step * power >= value) return step * power
  return 10 * power
}

function short(value: number): string {
  if (value >= 1e6) return `${+(value / 1e6).toFixed(1)}M`
  if (value >= 1e3) return `${+(value / 1e3).toFixed(1)}k`
  return `${+value.toPrecision(3)}`
}

/** How a chart writes its numbers: on the axis, and in a bar's tooltip. Money passes its own formatter. */
export interface ChartNumbers {
  readonly axis: (value: number) => string
  readonly value: (value: number) => string
}

const COUNTS: ChartNumbers = { axis: short, value: (v) => String(v) }

/** Stacked bars, one per label (day), with a title and description for screen readers. */
export function stackedBars(
  title: string,
  labels: readonly string[],
  series: readonly Series[],
  numbers: ChartNumbers = COUNTS,
): Html {
  const totals = labels.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0))
  const max = niceMax(Math.max(0, ...totals))
  const plotW = W - PAD.left - PAD.right
  const plotH = H - PAD.top - PAD.bottom
  const slot = plotW / Math.max(1, labels.length)
  const barW = Math.max(1, slot * 0.7)
  const y = (v: number): number => PAD.top + plotH - (v / max) * plotH
  const parts: string[] = []
  for (let t = 0; t <= 4; t++) {
    const v = (max * t) / 4
    parts.push(
      `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#d0d7de" stroke-width="1"/>`,
    )
    parts.push(
      `<text x="${PAD.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" font-size="${FONT}" fill="#57606a">${escapeHtml(numbers.axis(v))}</text>`,
    )
  }
  const every = Math.ceil(labels.length / 10)
  labels.forEach((label, i) => {
    const x = PAD.left + i * slot + (slot - barW) / 2
    let base = 0
    for (const s of series) {
      const v = s.values[i] ?? 0
      if (v > 0) {
        parts.push(
          `<rect x="${x.toFixed(1)}" y="${y(base + v).toFixed(1)}" width="${barW.toFixed(1)}" height="${(y(base) - y(base + v)).toFixed(1)}" fill="${s.colour}"><title>${escapeHtml(`${label} ${s.name}: ${numbers.value(v)}`)}</title></rect>`,
        )
      }
      base += v
    }
    if (i % every === 0)
      parts.push(
        `<text x="${(x + barW / 2).toFixed(1)}" y="${H - PAD.bottom + 16}" text-anchor="middle" font-size="${FONT}" fill="#57606a">${escapeHtml(label.slice(5))}</text>`,
      )
  })
  series.forEach((s, i) => {
    const lx = PAD.left + i * 150
    parts.push(
      `<rect x="${lx}" y="${H - 14}" width="10" height="10" fill="${s.colour}"/><text x="${lx + 14}" y="${H - 5}" font-size="${FONT}" fill="#1b1f24">${escapeHtml(s.name)}</text>`,
    )
  })
  const desc = `${series.map((s) => s.name).join(' and ')} per day, ${labels[0] ?? ''} to ${labels[labels.length - 1] ?? ''}; the numbers are in the table below.`
  // On a phone the chart keeps a legible width and scrolls in its own box (portal.css).
  return raw(
    `<div class="chart-scroll" tabindex="0" role="region" aria-label="${escapeHtml(title)}"><svg class="chart" role="img" aria-labelledby="chart-t-${slug(title)} chart-d-${slug(title)}" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" xmlns="http://www.w3.org/2000/svg"><title id="chart-t-${slug(title)}">${escapeHtml(title)}</title><desc id="chart-d-${slug(title)}">${escapeHtml(desc)}</desc>${parts.join('')}</svg></div>`,
  )
}

function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-')
}
