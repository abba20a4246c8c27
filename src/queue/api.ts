// The shapes of the /queue API: which endpoints have a /queue twin, what a stored request
// looks like, and the query of the list. Routes validate with these; the OpenAPI document
// (docs.ts) shows them.
import { z } from 'zod'
import { cursorQuery, listOf } from '../api/common.ts'
import type { Endpoint } from '../config/schema.ts'
import { REQUEST_STATUSES } from './ports.ts'

/** The /v2 endpoints with a /queue twin. */
export const QUEUED_ENDPOINTS: ReadonlySet<Endpoint> = new Set<Endpoint>([
  'chat.completions',
  'completions',
  'embeddings',
  'audio.transcriptions',
  'audio.translations',
  'images.generations',
  'images.edits',
])

export const QueueRequest = z
  .object({
    id: z.string().meta({ description: '`qreq_…`' }),
    object: z.literal('queue.request'),
    status: z.enum(REQUEST_STATUSES),
    created_at: z.number().int().meta({ description: 'Unix seconds.' }),
    key_id: z.string().meta({ description: 'The key that submitted it.' }),
    endpoint: z.string().meta({ description: 'The endpoint path under the API root, e.g. `/chat/completions`.' }),
    model: z.string().nullable(),
    position: z
      .number()
      .int()
      .nullable()
      .optional()
      .meta({ description: 'While queued: how many are ahead of it in the line of its key and model.' }),
    cancel_requested: z
      .boolean()
      .optional()
      .meta({ description: 'While in_progress: a cancel was asked and its upstream call is being aborted.' }),
    attempts: z
      .number()
      .int()
      .meta({ description: 'Admissions so far; an upstream 429 or 5xx puts the request back in line for another.' }),
    started_at: z.number().int().nullable(),
    completed_at: z.number().int().nullable(),
    expires_at: z.number().int().nullable().meta({ description: 'When the result (or an unstarted request) expires.' }),
    response: z
      .object({
        status_code: z.number().int().meta({ description: "The upstream's status (or the gateway's, for a refusal)." }),
        content_type: z.string().nullable().optional(),
        body_encoding: z
          .enum(['text', 'base64', 'none'])
          .optional()
          .meta({ description: 'Absent: `body` is the parsed JSON reply.' }),
        body: z.unknown(),
        usage: z
          .object({ input_tokens: z.number().int(), output_tokens: z.number().int(), total_tokens: z.number().int() })
          .meta({ description: 'The tokens charged.' }),
      })
      .optional()
      .meta({ description: 'Once finished with a reply, until it expires.' }),
    owner: z.string().optional().meta({ description: 'The owner (admin API only).' }),
  })
  .meta({ description: 'A request stored by `Prefer: respond-async`, and where it stands.' })

export const QueueRequestList = listOf(QueueRequest)

export const listRequestsQuery = z.strictObject({
  limit: cursorQuery.limit,
  after: cursorQuery.after,
  status: z.enum(REQUEST_STATUSES).optional().meta({ description: 'Only requests in this status.' }),
})

export const QueueLines = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({
      key_id: z.string(),
      model: z.string(),
      depth: z.number().int().meta({ description: 'Calls and stored requests waiting.' }),
      oldest_joined_at: z.string().nullable(),
      oldest_wait_ms: z.number().int().nullable(),
    }),
  ),
  total_depth: z.number().int(),
  worker: z
    .enum(['running', 'accept_only', 'stopped'])
    .meta({ description: 'Whether this instance runs stored requests.' }),
})
