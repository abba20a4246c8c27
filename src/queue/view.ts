// A stored request as the API shows it (GET /queue/requests/{id}, lists, 202 replies).
import type { Endpoint } from '../config/schema.ts'
import { PROXIED_ENDPOINTS } from '../inference/endpoints.ts'
import { anthropicResultOf } from '../protocols/anthropic/queued-result.ts'
import { statusAt, type CallerProtocol, type RequestSummary, type StoredResult } from './ports.ts'

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

export function endpointPath(endpoint: Endpoint): string {
  return PROXIED_ENDPOINTS.find((s) => s.endpoint === endpoint && s.method === 'POST')?.route ?? endpoint
}

/** How each caller protocol names the endpoint and reads a result (StoredCall.protocol). */
const PROTOCOLS: Record<CallerProtocol, { path: string; result: (result: StoredResult, id: string) => StoredResult }> =
  {
    anthropic: { path: '/v1/messages', result: anthropicResultOf },
  }

/** The status a client sees (ports.ts, statusAt). */
export const statusOf = statusAt

export function requestView(
  request: RequestSummary,
  options: { readonly now: number; readonly ttlMs: number; readonly position?: number | null },
): Record<string, unknown> {
  const status = statusOf(request, options.now, options.ttlMs)
  const protocol = request.call.protocol === undefined ? undefined : PROTOCOLS[request.call.protocol]
  const kept = status === 'expired' ? null : request.result
  const result = kept === null || protocol === undefined ? kept : protocol.result(kept, request.id)
  const expiresAt = request.finishedAt === null ? request.createdAt + options.ttlMs : request.finishedAt + options.ttlMs
  return {
    id: request.id,
    object: 'queue.request',
    status,
    created_at: seconds(request.createdAt),
    key_id: request.keyId,
    endpoint: protocol?.path ?? endpointPath(request.call.endpoint),
    model: request.call.model,
    ...(status === 'queued' ? { position: options.position ?? null } : {}),
    ...(status === 'in_progress' && request.cancelRequested ? { cancel_requested: true } : {}),
    attempts: request.attempts,
    started_at: seconds(request.startedAt),
    completed_at: seconds(request.finishedAt),
    expires_at: seconds(expiresAt),
    ...(result === null
      ? {}
      : {
          response: {
            status_code: result.statusCode,
            ...(result.encoding === 'json' ? {} : { content_type: result.contentType, body_encoding: result.encoding }),
            body: result.body,
            usage: {
              input_tokens: result.usage.inputTokens,
              output_tokens: result.usage.outputTokens,
              total_tokens: result.usage.inputTokens + result.usage.outputTokens,
            },
          },
        }),
  }
}
