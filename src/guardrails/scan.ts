// One body checked under one policy: every text the walk finds (text-fields.ts) is run
// through the policy's rules, and what they find decides the call. A `block` anywhere
// refuses it (nothing is changed); otherwise each `mask` match is replaced by a typed
// placeholder ([EMAIL_1]; the same value gets the same one throughout the call) and each
// `flag` match is only noted. A finding says which rule, what it did and where: never the
// matched text.
import type { Action } from './config.ts'
import { merge, type Span } from './detectors.ts'
import { unescapedJson } from './nested-json.ts'
import type { CompiledPolicy, Rule } from './policy.ts'
import { walkTexts, withTexts } from './text-fields.ts'

export interface Finding {
  readonly detector: string
  readonly action: Exclude<Action, 'off'>
  /** Where in the body, as a param: `messages[1].content`. */
  readonly path: string
}

export interface Verdict {
  readonly findings: readonly Finding[]
  /** The first block found: the call is refused, the body left as it was. */
  readonly blocked?: Finding
  /** Placeholders put in, each with the value it stands for (for a reply to be given back its values). */
  readonly masked: ReadonlyMap<string, string>
  /** The body to send: a masked copy, or the body itself when nothing was masked. */
  readonly body: Readonly<Record<string, unknown>>
}

export interface Hit extends Span {
  readonly rule: Rule
}

/** The matches of every rule in one text; of overlapping ones, the one that starts first (the longer at one start) is kept. */
export function hitsIn(text: string, rules: readonly Rule[]): Hit[] {
  let hits: Hit[] = []
  for (const rule of rules) {
    const found = rule.detector.find(text)
    if (found.length === 0) continue
    const mine = found.map((s) => ({ start: s.start, end: s.end, rule }))
    hits = hits.length === 0 ? mine : (merge(hits, mine) as Hit[])
  }
  return hits
}

/** Checks `body` under `policy`: the verdict, and unless something blocks, the body masked (a copy; `body` is not changed). */
export function scanBody(body: Readonly<Record<string, unknown>>, policy: CompiledPolicy): Verdict {
  const findings: Finding[] = []
  const edits: Array<{ steps: Array<string | number>; text: string; hits: Hit[] }> = []
  let blocked: Finding | undefined
  walkTexts(body, (visit) => {
    if (blocked !== undefined) return
    // JSON in a text is read (and masked) with its escapes written out: `\u0041KIA…` is an AWS key id.
    const text = unescapedJson(visit.text) ?? visit.text
    const hits = hitsIn(text, policy.rules)
    if (hits.length === 0) return
    const path = visit.where()
    let masks = false
    for (const hit of hits) {
      const finding = { detector: hit.rule.detector.name, action: hit.rule.action, path }
      findings.push(finding)
      if (hit.rule.action === 'block') {
        blocked = finding
        return
      }
      if (hit.rule.action === 'mask') masks = true
    }
    if (masks) edits.push({ steps: visit.steps(), text, hits })
  })
  const masked = new Map<string, string>()
  if (blocked !== undefined) return { findings, blocked, masked, body }
  if (edits.length === 0) return { findings, masked, body }
  const byValue = new Map<string, string>()
  const counts = new Map<string, number>()
  const texts: Array<{ steps: Array<string | number>; text: string }> = []
  for (const edit of edits) {
    let out = ''
    let from = 0
    for (const hit of edit.hits) {
      if (hit.rule.action !== 'mask') continue
      const value = edit.text.slice(hit.start, hit.end)
      const label = hit.rule.detector.label
      const id = `${label}\u0000${value}`
      let placeholder = byValue.get(id)
      if (placeholder === undefined) {
        const n = (counts.get(label) ?? 0) + 1
        counts.set(label, n)
        placeholder = `[${label}_${n}]`
        byValue.set(id, placeholder)
        masked.set(placeholder, value)
      }
      out += edit.text.slice(from, hit.start) + placeholder
      from = hit.end
    }
    texts.push({ steps: edit.steps, text: out + edit.text.slice(from) })
  }
  return { findings, masked, body: withTexts(body, texts) }
}
