// The RAG gateway's chat prompts (docs/rag-gateway.md): `POST /query-pipeline/api/v1/chat`
// and `/query` carry the user's question in `userPrompt` (the provider's guides), `query` or
// `message` (earlier spellings). They are checked under the one policy `guardrails.rag`
// names, as the same walk checks a completion's `prompt` list: the fields are read as one
// list, scanned, and put back (masked) under their own names.
import type { CompiledPolicy } from './policy.ts'
import { scanBody, type Finding } from './scan.ts'

/** The body members that carry a RAG chat prompt. */
export const RAG_PROMPT_FIELDS = ['userPrompt', 'query', 'message'] as const

const PROMPT_ROUTE = /^\/api\/v1\/(?:chat|query)\/?$/

/** Whether a RAG request is a chat prompt to check: `path` is the route inside the service, decoded. */
export function isRagPrompt(service: string, method: string, path: string): boolean {
  return service === 'query-pipeline' && method === 'POST' && PROMPT_ROUTE.test(path)
}

export interface RagPromptVerdict {
  readonly findings: readonly Finding[]
  readonly blocked?: Finding
  /** The body to send: `body` itself, or a copy with its prompts masked. */
  readonly body: Record<string, unknown>
}

/** Checks a chat prompt's body under `policy`; paths name the body's member (`userPrompt`). */
export function scanRagPrompt(body: Record<string, unknown>, policy: CompiledPolicy): RagPromptVerdict {
  const fields = RAG_PROMPT_FIELDS.filter((f) => typeof body[f] === 'string')
  const prompts = { prompt: fields.map((f) => body[f] as string) }
  const verdict = scanBody(prompts, policy)
  const named = (f: Finding): Finding => ({ ...f, path: fields[Number(/\d+/.exec(f.path)?.[0])] ?? f.path })
  const findings = verdict.findings.map(named)
  if (verdict.blocked !== undefined) return { findings, blocked: named(verdict.blocked), body }
  if (verdict.body === prompts) return { findings, body }
  const masked = verdict.body.prompt as string[]
  const out = { ...body }
  fields.forEach((f, i) => (out[f] = masked[i]))
  return { findings, body: out }
}
