// Plain-text tables for a terminal: a header row, columns padded to their widest cell.
import { formatAmount } from '../keys/money.ts'

export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd()
  return [line(headers), ...rows.map(line)].join('\n') + '\n'
}

/** Label: value lines, labels aligned. */
export function fields(pairs: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(0, ...pairs.map(([label]) => label.length))
  return pairs.map(([label, value]) => `${`${label}:`.padEnd(width + 1)}  ${value}`).join('\n') + '\n'
}

export function integer(n: unknown): string {
  return typeof n === 'number' ? n.toLocaleString('en-US') : '-'
}

/** An amount of currency units, written as everywhere else (src/keys/money.ts); its currency goes in the column's header. */
export function money(n: unknown): string {
  return typeof n === 'number' ? formatAmount(n) : '-'
}

/** A value for a terminal: control characters (escape sequences) never reach it. */
export function text(value: unknown): string {
  if (value === null || value === undefined) return '-'
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : clean(value.map(String).join(', '))
  if (typeof value === 'object') return clean(JSON.stringify(value))
  return clean(String(value))
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

function clean(value: string): string {
  return value.replace(CONTROL, '?')
}
