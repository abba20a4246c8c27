// Reply-side checks (a policy's `replies:`): the model's reply run through the policy's
// reply rules. A whole reply is checked at once; a stream as it passes, on a bounded
// window. The stream's text is held back by at most HOLD_CHARS characters (with the
// events that carry them), so that a match split across chunks is whole in the window
// before any of it has left: each new piece of text is scanned with the HOLD_CHARS before
// it, and an event goes out once HOLD_CHARS more characters have come after its text (or
// the stream ends). A `block` ends the stream (the relay writes the error event); a
// `flag` passes and is recorded. Neither ever keeps or reports the matched text.
import type { Rule } from './policy.ts'
import type { Finding } from './scan.ts'

/** The most characters of a stream's text held back: the longest match a reply check is sure to catch whole. */
export const HOLD_CHARS = 256

/** What a check found: block findings end the reply; `sentChars` is the reply text the client already had. */
export interface ReplyFinding extends Finding {
  readonly sentChars: number
}

/** A stream's window: bytes to write as events pass, or the finding that ends it. */
export interface ReplyWindow {
  /** An event's bytes and the reply text it carries: what may be written now ('' while held), or a block. */
  push(bytes: string, text: string): string | ReplyFinding
  /** The stream is complete: the rest to write, or a block. */
  end(): string | ReplyFinding
  /** The stream's text let go so far, in characters (with a block: what the client already had). */
  sent(): number
}

interface Held {
  readonly bytes: string
  /** The stream's text offset after this event's text. */
  readonly end: number
}

/** Every finding of `rules` in `text` whose end is before `before` (a match touching the end may still grow). */
function findingsIn(
  text: string,
  rules: readonly Rule[],
  before: number,
): Array<{ rule: Rule; start: number; end: number }> {
  const out: Array<{ rule: Rule; start: number; end: number }> = []
  for (const rule of rules) for (const s of rule.detector.find(text)) if (s.end < before) out.push({ rule, ...s })
  return out
}

/**
 * A window over one stream's text under `rules`; `flagged` is told each flag once (its
 * text offset), `hold` is HOLD_CHARS but for tests.
 */
export function replyWindow(
  rules: readonly Rule[],
  flagged: (finding: ReplyFinding) => void,
  hold = HOLD_CHARS,
): ReplyWindow {
  let window = ''
  /** The stream's text offset of window[0]. */
  let base = 0
  let total = 0
  let sent = 0
  const held: Held[] = []
  const seen = new Set<string>()
  const check = (final: boolean): ReplyFinding | undefined => {
    for (const hit of findingsIn(window, rules, final ? Infinity : window.length)) {
      const finding = { detector: hit.rule.detector.name, action: hit.rule.action, path: 'reply', sentChars: sent }
      if (hit.rule.action === 'block') return finding
      const id = `${hit.rule.detector.name}\u0000${base + hit.start}`
      if (seen.has(id)) continue
      seen.add(id)
      flagged(finding)
    }
    return undefined
  }
  const release = (upTo: number): string => {
    let out = ''
    while (held.length > 0 && held[0]!.end <= upTo) {
      const event = held.shift()!
      out += event.bytes
      sent = event.end
    }
    // Keep the HOLD_CHARS before what is held: a match ending in held text starts there at the earliest.
    const keepFrom = Math.max(base, sent - hold)
    window = window.slice(keepFrom - base)
    base = keepFrom
    return out
  }
  return {
    push(bytes, text) {
      window += text
      total += text.length
      held.push({ bytes, end: total })
      if (text.length > 0) {
        const blocked = check(false)
        if (blocked !== undefined) return blocked
      }
      return release(total - hold)
    },
    end() {
      const blocked = check(true)
      if (blocked !== undefined) return blocked
      return release(Infinity)
    },
    sent: () => sent,
  }
}

/** The texts of a whole reply (chat, completions, Responses output): every string under a text-like key. */
export function replyTexts(reply: unknown): string[] {
  const out: string[] = []
  eachReplyText(reply, (text) => out.push(text))
  return out
}

/**
 * Each string under a text-like key of a whole reply, in order, with the steps to it (`trail`,
 * the walk's own: copy what you keep). An array's items are under the array's key. The one walk
 * of the reply detectors (replyTexts) and the external checks (external/reply-texts.ts).
 */
export function eachReplyText(
  reply: unknown,
  visit: (text: string, trail: ReadonlyArray<string | number>) => void,
): void {
  const trail: Array<string | number> = []
  const walk = (value: unknown, key: string): void => {
    if (typeof value === 'string') {
      if (TEXT_KEYS.has(key)) visit(value, trail)
      return
    }
    if (typeof value !== 'object' || value === null) return
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        trail.push(i)
        walk(value[i], key)
        trail.pop()
      }
    } else {
      for (const [k, v] of Object.entries(value)) {
        trail.push(k)
        walk(v, k)
        trail.pop()
      }
    }
  }
  walk(reply, '')
}
export const TEXT_KEYS = new Set(['content', 'text', 'refusal', 'arguments', 'reasoning_content'])

/** The first block in a whole reply under `rules` (flags told to `flagged`); undefined: it may go. */
export function checkWholeReply(
  reply: unknown,
  rules: readonly Rule[],
  flagged: (finding: ReplyFinding) => void,
): ReplyFinding | undefined {
  for (const text of replyTexts(reply))
    for (const hit of findingsIn(text, rules, Infinity)) {
      const finding = { detector: hit.rule.detector.name, action: hit.rule.action, path: 'reply', sentChars: 0 }
      if (hit.rule.action === 'block') return finding
      flagged(finding)
    }
  return undefined
}
