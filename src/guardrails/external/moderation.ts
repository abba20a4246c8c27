// A moderation check: the call's texts sent to an OpenAI-compatible moderation endpoint of
// a configured backend (`POST {baseUrl}/moderations`, `input` a list of the texts, with the
// backend's own key and headers), one result per text. A result that is `flagged` (when the
// check blocks on it), or a category score at or above its threshold, denies the call,
// naming the category and the text's path. An answer that is not that shape is a failure.
import { z } from 'zod'
import type { Config } from '../../config/schema.ts'
import type { ModerationCheck } from './config.ts'
import type { Outcome, PlacedText } from './outcome.ts'
import { postJson, readAnswer, type Agents } from './post.ts'

/** The part of OpenAI's moderation answer a check reads; anything else in it is ignored. */
const answerSchema = z.object({
  results: z
    .array(
      z.object({
        flagged: z.boolean(),
        categories: z.record(z.string(), z.boolean().nullable()).optional(),
        category_scores: z.record(z.string(), z.number().nullable()).optional(),
      }),
    )
    .min(1),
})
type Result = z.infer<typeof answerSchema>['results'][number]

/** The longest moderation answer read: a score per category per text. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024

const CATEGORY = /^[a-z][a-z0-9/_-]{0,63}$/

/** Why a result denies under `check`: a category over its threshold, or `flagged`; undefined: it passes. */
function denial(result: Result, check: ModerationCheck): string | undefined {
  for (const [category, threshold] of Object.entries(check.thresholds)) {
    const score = result.category_scores?.[category]
    if (typeof score === 'number' && score >= threshold) return category
  }
  if (!check.flagged || !result.flagged) return undefined
  // The service's category name goes into an error message and a record: only a plain one.
  const named = Object.entries(result.categories ?? {}).find(([name, on]) => on === true && CATEGORY.test(name))
  return named?.[0] ?? 'flagged'
}

/** Runs `check` over `texts` (at least one) with the backend of the configuration in force. */
export async function moderate(
  check: ModerationCheck,
  texts: readonly PlacedText[],
  config: Pick<Config, 'backends' | 'secrets'>,
  agents: Agents,
): Promise<Outcome> {
  const backend = config.backends[check.backend]
  // The loader made sure of it (externalCheckProblems); a reload that dropped it is a failure, not a pass.
  if (backend?.type !== 'openai')
    return { verdict: 'error', problem: `backend "${check.backend}" is not an openai backend` }
  const key = backend.apiKeyEnv === undefined ? undefined : config.secrets.backendKeys[backend.apiKeyEnv]
  const url = new URL(`${backend.baseUrl.replace(/\/+$/, '')}/moderations`)
  const body = JSON.stringify({ model: check.model, input: texts.map((t) => t.text) })
  const headers = { ...backend.headers, ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) }
  const answer = await postJson(url, headers, body, { timeoutMs: check.timeoutMs, maxBytes: MAX_ANSWER_BYTES }, agents)
  const read = readAnswer(answer, answerSchema, 'an answer not in the moderation shape')
  if ('problem' in read) return { verdict: 'error', problem: read.problem }
  const { results } = read.value
  if (results.length !== texts.length)
    return { verdict: 'error', problem: `${results.length} results for ${texts.length} texts` }
  for (const [i, result] of results.entries()) {
    const reason = denial(result, check)
    if (reason !== undefined) return { verdict: 'deny', reason, path: texts[i]!.path }
  }
  return { verdict: 'allow' }
}
