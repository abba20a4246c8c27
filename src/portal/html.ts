// HTML templates with escaping by default: every value put into html`...` is escaped unless
// it is already Html (made by html`...` itself, or by raw() for markup the code wrote).
// Attribute values are always quoted in the templates, so escaping & < > " ' is enough.

export class Html {
  readonly text: string
  constructor(text: string) {
    this.text = text
  }
  toString(): string {
    return this.text
  }
}

export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[]

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c)
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text
  if (value === null || value === undefined || value === false) return ''
  if (Array.isArray(value)) return value.map(render).join('')
  return escapeHtml(String(value))
}

export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): Html {
  let out = strings[0] ?? ''
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '')
  })
  return new Html(out)
}

/** Markup the code itself produced (an SVG built from numbers); never for user input. */
export function raw(text: string): Html {
  return new Html(text)
}
