// A RAG chat prompt checked before it is relayed (guardrails/rag-prompt.ts): the one kind
// of RAG request whose body is read whole by the gateway (bounded by the service's body
// cap), so that a blocked prompt never reaches the query pipeline and a masked one reaches
// it masked. Every other RAG request streams through as it arrives (relay.ts).
import type { Identity } from '../auth/identity.ts'
import { gatewayError } from '../errors.ts'
import type { GuardrailsConfig } from '../guardrails/config.ts'
import type { Guardrails } from '../guardrails/create.ts'
import { readBodyChunks, type BodyRate } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'

/**
 * The body to send in place of the client's stream: as it came, or masked. Throws
 * guardrail_blocked, 413 past `maxBytes`, or request_timeout when the body comes slower
 * than `rate` (a declared length never sent in full must not hold the connection).
 */
export async function checkedPrompt(
  ctx: RequestContext,
  guardrails: Guardrails,
  config: GuardrailsConfig,
  who: Identity,
  maxBytes: number,
  rate: BodyRate,
): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  await readBodyChunks(ctx.req, rate, (chunk) => {
    size += chunk.length
    if (size > maxBytes)
      throw gatewayError('rag_body_too_large', {
        message: `Request body too large: the query-pipeline service takes at most ${maxBytes} bytes`,
        headers: { connection: 'close' },
      })
    chunks.push(chunk)
  })
  const bytes = Buffer.concat(chunks, size)
  let value: unknown
  try {
    value = JSON.parse(bytes.toString('utf8'))
  } catch {
    return bytes // not JSON: the service refuses it, there is no prompt to read
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return bytes
  const body = value as Record<string, unknown>
  const sent = guardrails.screenRagPrompt(body, who, ctx, config)
  return sent === body ? bytes : Buffer.from(JSON.stringify(sent))
}
