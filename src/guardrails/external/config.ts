// A policy's `external:` checks (docs/guardrails.md, "External checks"): services outside
// the gateway that judge a call's text, each with its own timeout and an explicit answer
// to "it did not answer" (`onError`). Validated with the rest of the file; what only the
// whole file can tell (the backend exists, the secret is set) is checked by
// externalCheckProblems when the file is loaded.
import { z } from 'zod'

/** A check's name: a metrics label and part of an error message, so short and plain. */
const checkName = z.string().regex(/^[a-z][a-z0-9_]{0,39}$/, 'must be lower case letters, digits and _, at most 40')
const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name')

const common = {
  name: checkName,
  /** The whole exchange with the service, connect included. */
  timeoutMs: z.number().int().min(10).max(60_000).default(2_000),
  /**
   * No answer in time, an error status or an answer that does not validate: `open` lets the
   * call through (counted and audited), `closed` refuses it with guardrail_unavailable (503).
   * No default: whoever adds a check decides.
   */
  onError: z.enum(['open', 'closed']),
  /**
   * Judge the model's whole (not streamed) reply too, before it goes out: a deny stops it, a
   * rewrite changes it. Streams are not sent (docs/guardrails.md says why).
   */
  replies: z.boolean().default(false),
}

/** An OpenAI-compatible moderation endpoint (`POST {baseUrl}/moderations`) of a configured backend. */
const moderationCheck = z
  .strictObject({
    type: z.literal('moderation'),
    /** A backend of `backends:` of type openai: its baseUrl, apiKeyEnv and headers are used. */
    backend: z.string().min(1),
    model: z.string().min(1).default('omni-moderation-latest'),
    /** Block when the endpoint says `flagged` for any text. */
    flagged: z.boolean().default(true),
    /** Block when a category's score (category_scores) is at or above its threshold. */
    thresholds: z.record(z.string().regex(/^[a-z][a-z0-9/_-]{0,63}$/), z.number().min(0).max(1)).default({}),
    ...common,
  })
  .refine((c) => c.flagged || Object.keys(c.thresholds).length > 0, {
    message: 'blocks on nothing: set flagged: true or name thresholds',
    path: ['flagged'],
  })

/** A service of the operator's own, sent the texts signed like Tollgate's webhooks; it answers allow, deny or rewrite. */
const webhookCheck = z.strictObject({
  type: z.literal('webhook'),
  url: z.url({ protocol: /^https?$/ }),
  /** The env var holding the signing secret (`whsec_…`, as a webhook endpoint's): the config holds the name only. */
  secretEnv: envName,
  /** The most bytes of an answer read; a longer one is a failure. */
  maxAnswerBytes: z
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(8 * 1024 * 1024),
  ...common,
})

export const externalCheckSchema = z.discriminatedUnion('type', [moderationCheck, webhookCheck])
export type ExternalCheck = z.infer<typeof externalCheckSchema>
export type ModerationCheck = Extract<ExternalCheck, { type: 'moderation' }>
export type WebhookCheck = Extract<ExternalCheck, { type: 'webhook' }>

/** A policy's checks, run in this order (each sees the text the one before it rewrote). */
export const externalChecksSchema = z
  .array(externalCheckSchema)
  .max(8)
  .default([])
  .superRefine((checks, ctx) => {
    const seen = new Set<string>()
    checks.forEach((c, i) => {
      if (seen.has(c.name))
        ctx.addIssue({ code: 'custom', message: `a second check named "${c.name}"`, path: [i, 'name'] })
      seen.add(c.name)
    })
  })

interface PoliciesOf {
  readonly policies: Readonly<Record<string, { readonly external: readonly ExternalCheck[] }>>
}

/** Every check whose backend is not an openai backend, or whose secret is not set, as `path: message`. */
export function externalCheckProblems(
  guardrails: PoliciesOf,
  backends: Readonly<Record<string, { readonly type: string }>>,
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const out: string[] = []
  for (const [policy, { external }] of Object.entries(guardrails.policies))
    external.forEach((check, i) => {
      const at = `guardrails.policies.${policy}.external.${i}`
      if (check.type === 'moderation') {
        const backend = Object.hasOwn(backends, check.backend) ? backends[check.backend] : undefined
        if (backend === undefined) out.push(`${at}.backend: unknown backend "${check.backend}" (backends)`)
        else if (backend.type !== 'openai')
          out.push(
            `${at}.backend: "${check.backend}" is a ${backend.type} backend; a moderation check needs an openai one`,
          )
      } else if (!env[check.secretEnv]) out.push(`${at}.secretEnv: ${check.secretEnv} is not set`)
    })
  return out
}

/** The webhook checks' signing secrets by env var name, read once with the file (config/load.ts). */
export function externalSecrets(
  guardrails: PoliciesOf,
  env: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = {}
  for (const { external } of Object.values(guardrails.policies))
    for (const check of external) {
      const value = check.type === 'webhook' ? env[check.secretEnv] : undefined
      if (check.type === 'webhook' && value) out[check.secretEnv] = value
    }
  return out
}
