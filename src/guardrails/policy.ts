// Policies compiled once per configuration, and the one a call runs under: its tier's,
// merged with its key's when the key has one. The merge takes, detector by detector, the
// stricter action (block > mask > flag > off) and adds the key's patterns and deny-list to
// the tier's: whatever the key's policy says, the call is checked at least as its tier's is.
import { ACTIONS, type Action, type GuardrailsConfig, type PolicyConfig } from './config.ts'
import { DETECTORS, type Detector } from './detectors.ts'
import type { ExternalCheck } from './external/config.ts'

/** A custom pattern or a deny-list, as a detector: what it finds, under its own name. */
export interface Rule {
  readonly detector: Detector
  readonly action: Exclude<Action, 'off'>
}

/** A policy ready to scan with: its rules in order (of two that find the very same span, the first keeps it). */
export interface CompiledPolicy {
  /** The policy's name; a merged one is `tier+key`, as metrics and the audit log show it. */
  readonly name: string
  readonly rules: readonly Rule[]
  /** Masked values go back into a whole reply (a merged policy: when either says so; it only ever gives the caller its own text). */
  readonly restore: boolean
  /** The reply-side rules (`replies:`), built-in detectors only, block or flag. */
  readonly replyRules: readonly Rule[]
  /** External checks (guardrails/external/), in order; a merged policy runs the tier's, then the key's. */
  readonly external: readonly ExternalCheck[]
}

const rank = (a: Action): number => ACTIONS.indexOf(a)
/** The stricter of two actions. */
export const stricter = (a: Action, b: Action): Action => (rank(a) >= rank(b) ? a : b)

/**
 * Custom patterns run over windows of at most this many characters (overlapping by
 * WINDOW_OVERLAP), so that a pattern's cost is bounded by the window, not by a 4 MB text;
 * a custom match longer than the overlap that straddles two windows can be missed.
 */
export const WINDOW_CHARS = 8192
export const WINDOW_OVERLAP = 512

function windowed(pattern: RegExp): (text: string) => Array<{ start: number; end: number }> {
  return (text) => {
    const out: Array<{ start: number; end: number }> = []
    for (let from = 0; from < text.length; from += WINDOW_CHARS - WINDOW_OVERLAP) {
      const window = text.slice(from, from + WINDOW_CHARS)
      pattern.lastIndex = 0
      for (let m = pattern.exec(window); m !== null; m = pattern.exec(window)) {
        if (m[0] === '') {
          pattern.lastIndex++
          continue
        }
        const start = from + m.index
        if (out.length === 0 || start >= out[out.length - 1]!.end) out.push({ start, end: start + m[0].length })
      }
      if (from + WINDOW_CHARS >= text.length) break
    }
    return out
  }
}

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** A rule per built-in detector `actions` names (in the detectors' order), at the stricter of its actions there. */
function builtInRules(...actions: ReadonlyArray<Readonly<Record<string, Action>>>): Rule[] {
  const rules: Rule[] = []
  for (const detector of DETECTORS.values()) {
    const action = actions.reduce<Action>((a, named) => stricter(a, named[detector.name] ?? 'off'), 'off')
    if (action !== 'off') rules.push({ detector, action })
  }
  return rules
}

const actionsOf = (rules: readonly Rule[]): Record<string, Action> =>
  Object.fromEntries(rules.map((r) => [r.detector.name, r.action]))

function compile(name: string, policy: PolicyConfig): CompiledPolicy {
  const rules = builtInRules(policy.detectors)
  for (const p of policy.patterns) {
    const find = windowed(new RegExp(p.regex, `${p.flags}g`))
    rules.push({
      detector: { name: p.name, label: p.name.toUpperCase(), finds: 'a custom pattern', find },
      action: p.action,
    })
  }
  if (policy.denylist !== undefined) {
    const { terms, caseSensitive, action } = policy.denylist
    // Longest first, so that of two terms one of which starts the other, the whole is taken.
    const alternatives = [...new Set(terms)].sort((a, b) => b.length - a.length).map(escapeRegex)
    const pattern = new RegExp(
      `(?<![\\p{L}\\p{N}_])(?:${alternatives.join('|')})(?![\\p{L}\\p{N}_])`,
      caseSensitive ? 'gu' : 'giu',
    )
    rules.push({
      detector: { name: 'denylist', label: 'DENIED', finds: 'a term of the deny-list', find: windowed(pattern) },
      action,
    })
  }
  return { name, rules, restore: policy.restore, replyRules: builtInRules(policy.replies), external: policy.external }
}

/** Two policies as one: each detector at the stricter action, every rule of either kept. */
function merged(tier: CompiledPolicy, key: CompiledPolicy): CompiledPolicy {
  const builtIn = (r: Rule): boolean => DETECTORS.get(r.detector.name) === r.detector
  const rules = builtInRules(actionsOf(tier.rules.filter(builtIn)), actionsOf(key.rules.filter(builtIn)))
  for (const r of [...tier.rules, ...key.rules]) if (!builtIn(r)) rules.push(r)
  return {
    name: `${tier.name}+${key.name}`,
    rules,
    restore: tier.restore || key.restore,
    replyRules: builtInRules(actionsOf(tier.replyRules), actionsOf(key.replyRules)),
    // Every check of either: a key's policy adds checks, it never takes one of its tier's away.
    external: [...tier.external, ...key.external],
  }
}

export interface PolicyBook {
  /** The policy a call of `keyId` on `tierPolicy` (the tier's `guardrails`) runs under; undefined: none. */
  policyFor(tierPolicy: string | undefined, keyId: string): CompiledPolicy | undefined
}

/** The policies of one configuration, compiled; merged pairs are kept as they are asked for. */
export function compilePolicies(config: GuardrailsConfig): PolicyBook {
  const compiled = new Map(Object.entries(config.policies).map(([name, p]) => [name, compile(name, p)]))
  const pairs = new Map<string, CompiledPolicy>()
  return {
    policyFor(tierPolicy, keyId) {
      const tier = tierPolicy === undefined ? undefined : compiled.get(tierPolicy)
      const keyPolicy = Object.hasOwn(config.keys, keyId) ? config.keys[keyId] : undefined
      const key = keyPolicy === undefined ? undefined : compiled.get(keyPolicy)
      if (key === undefined || key === tier) return tier
      if (tier === undefined) return key
      const id = `${tier.name}\u0000${key.name}`
      let pair = pairs.get(id)
      if (pair === undefined) pairs.set(id, (pair = merged(tier, key)))
      return pair
    },
  }
}
