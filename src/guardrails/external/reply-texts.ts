// The texts of a whole reply with where they are, for the external checks that read replies:
// the strings replyTexts (reply-check.ts) reads, under the same keys, each with its path
// (`choices[0].message.content`) and the steps to it, so a webhook's rewrite goes back in
// its place (text-fields.ts withTexts).
import { TEXT_KEYS } from '../reply-check.ts'

export interface ReplyText {
  readonly path: string
  readonly steps: Array<string | number>
  text: string
}

/** Every non-empty text of `reply`, in order. */
export function replyTextsAt(reply: unknown): ReplyText[] {
  const out: ReplyText[] = []
  const trail: Array<string | number> = []
  const pathOf = (): string => {
    let path = ''
    for (const step of trail) path += typeof step === 'number' ? `[${step}]` : path === '' ? step : `.${step}`
    return path
  }
  const walk = (value: unknown, key: string): void => {
    if (typeof value === 'string') {
      if (value !== '' && TEXT_KEYS.has(key)) out.push({ path: pathOf(), steps: [...trail], text: value })
      return
    }
    if (typeof value !== 'object' || value === null) return
    const entries: Array<[string | number, unknown]> = Array.isArray(value)
      ? value.map((item: unknown, i) => [i, item])
      : Object.entries(value)
    for (const [step, child] of entries) {
      trail.push(step)
      walk(child, typeof step === 'number' ? key : step)
      trail.pop()
    }
  }
  walk(reply, '')
  return out
}
