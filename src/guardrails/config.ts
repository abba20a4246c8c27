// The `guardrails:` section of the configuration (docs/guardrails.md): named policies,
// each an action per built-in detector plus the policy's own patterns and deny-list, and
// the keys given a policy of their own. A tier names its policy in the plans
// (`tiers.<name>.guardrails`). Validated once at boot (and on reload) like the rest.
import safeRegex from 'safe-regex2'
import { z } from 'zod'
import { DETECTORS } from './detectors.ts'
import { externalChecksSchema } from './external/config.ts'

/** From loosest to strictest: a key's policy can only move a detector to the right (policy.ts). */
export const ACTIONS = ['off', 'flag', 'mask', 'block'] as const
export type Action = (typeof ACTIONS)[number]

const action = z.enum(ACTIONS)
/** An action per built-in detector, by its name; a name that is none is refused with the list. */
const actionsPerDetector = <A extends z.ZodType<string>>(actions: A) =>
  z
    .record(z.string(), actions)
    .default({})
    .superRefine((actions, ctx) => {
      for (const name of Object.keys(actions))
        if (!DETECTORS.has(name))
          ctx.addIssue({
            code: 'custom',
            message: `not a built-in detector; they are ${[...DETECTORS.keys()].join(', ')}`,
            path: [name],
          })
    })
const detectorActions = actionsPerDetector(action)
/** Reply-side actions: a reply is never masked (reply-check.ts). */
export const REPLY_ACTIONS = ['off', 'flag', 'block'] as const
const replyActions = actionsPerDetector(z.enum(REPLY_ACTIONS))

/** A custom pattern's name is its placeholder's type too ([NAME_1]) and a metrics label. */
const patternName = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'must be lower case letters, digits and _, at most 40')

/** The longest custom regex accepted, and the most repetitions in it (safe-regex2's count). */
export const MAX_PATTERN_CHARS = 500
const MAX_PATTERN_REPETITIONS = 25

const pattern = z
  .strictObject({
    name: patternName,
    regex: z.string().min(1).max(MAX_PATTERN_CHARS),
    /** `i`: case-insensitive. */
    flags: z.enum(['', 'i']).default(''),
    action: action.exclude(['off']),
  })
  .superRefine((p, ctx) => {
    let compiled: RegExp
    try {
      compiled = new RegExp(p.regex, `${p.flags}g`)
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `not a regular expression: ${(err as Error).message}`, path: ['regex'] })
      return
    }
    // Nested repetition ((a+)+, (a|aa)*) can take exponential time on a crafted text: refused.
    if (!safeRegex(compiled, { limit: MAX_PATTERN_REPETITIONS }))
      ctx.addIssue({
        code: 'custom',
        message: `may take exponential time (a repetition inside a repetition, or more than ${MAX_PATTERN_REPETITIONS} repetitions): rewrite it without nesting`,
        path: ['regex'],
      })
    if (compiled.test('')) ctx.addIssue({ code: 'custom', message: 'matches the empty text', path: ['regex'] })
  })

export const policySchema = z.strictObject({
  description: z.string().optional(),
  /** An action per built-in detector; unnamed detectors are off. */
  detectors: detectorActions,
  patterns: z.array(pattern).max(100).default([]),
  /** Words or phrases (a project's code name, a customer's name) matched whole, as one detector `denylist`. */
  denylist: z
    .strictObject({
      terms: z.array(z.string().trim().min(1).max(200)).min(1).max(10_000),
      action: action.exclude(['off']),
      caseSensitive: z.boolean().default(false),
    })
    .optional(),
  /**
   * Masked values are put back in a whole (not streamed) reply to the same call: the caller
   * reads "[EMAIL_1]" as the address it sent, the upstream never saw it. Off: the reply keeps
   * the placeholders.
   */
  restore: z.boolean().default(false),
  /**
   * Checks on the model's reply: an action (block, flag) per built-in detector. A whole
   * reply that must be blocked is refused; a stream is held back by a bounded window and
   * ended with an error event (guardrails/reply-check.ts).
   */
  replies: replyActions,
  /**
   * Services outside the gateway that judge the request's text after the detectors (a
   * moderation endpoint, the operator's webhook), in order; each with its timeout and onError
   * (guardrails/external/).
   */
  external: externalChecksSchema,
})
export type PolicyConfig = z.infer<typeof policySchema>

export const guardrailsSchema = z.strictObject({
  policies: z.record(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and -'), policySchema).default({}),
  /**
   * Keys given a policy of their own, by key id (`key_…`): it is merged with their tier's,
   * detector by detector, the stricter action winning, so a key is never looser than its tier.
   */
  keys: z.record(z.string().regex(/^key_[A-Za-z0-9]+$/, 'a key id (key_…)'), z.string().min(1)).default({}),
  /**
   * The policy the RAG gateway's chat prompts are checked under (`POST /query-pipeline/api/v1/chat`
   * and `/query`): its users log in with a JWT and have no key or tier, so the gateway names
   * one policy for them all. Unset: RAG prompts are not checked.
   */
  rag: z.string().min(1).optional(),
})
export type GuardrailsConfig = z.infer<typeof guardrailsSchema>

/** Every policy a tier or a key names that the file does not define, as `path: message`. */
export function unknownPolicies(
  guardrails: GuardrailsConfig,
  tiers: Readonly<Record<string, { guardrails?: string | undefined }>>,
): string[] {
  const out: string[] = []
  for (const [tier, plan] of Object.entries(tiers))
    if (plan.guardrails !== undefined && !Object.hasOwn(guardrails.policies, plan.guardrails))
      out.push(`plans.tiers.${tier}.guardrails: unknown policy "${plan.guardrails}" (guardrails.policies)`)
  if (guardrails.rag !== undefined && !Object.hasOwn(guardrails.policies, guardrails.rag))
    out.push(`guardrails.rag: unknown policy "${guardrails.rag}" (guardrails.policies)`)
  for (const [key, policy] of Object.entries(guardrails.keys))
    if (!Object.hasOwn(guardrails.policies, policy))
      out.push(`guardrails.keys.${key}: unknown policy "${policy}" (guardrails.policies)`)
  return out
}
