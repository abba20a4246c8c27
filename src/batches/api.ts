// The Batch API's shapes (OpenAI's CreateBatchRequest, Batch, ListBatchesResponse), read
// at the edge: the create body and the list query are checked here; the rest of the room
// speaks BatchRecord.
import { z } from 'zod'
import { cursorQuery, listOf } from '../api/common.ts'
import { BATCH_ENDPOINT_PATHS } from './input.ts'
import { BATCH_STATUSES, type BatchRecord } from './port.ts'

export const CreateBatchBody = z.strictObject({
  input_file_id: z
    .string()
    .min(1)
    .max(256)
    .meta({ description: 'A file uploaded with purpose "batch", one request per line.' }),
  endpoint: z
    .enum(BATCH_ENDPOINT_PATHS as [string, ...string[]])
    .meta({ description: 'The endpoint every line calls.' }),
  completion_window: z.literal('24h'),
  metadata: z
    .record(z.string().max(64), z.string().max(512))
    .refine((m) => Object.keys(m).length <= 16, 'at most 16 pairs')
    .nullable()
    .optional(),
  output_expires_after: z.unknown().optional(),
})

export const listBatchesQuery = z.strictObject({
  limit: cursorQuery.limit,
  after: cursorQuery.after,
})

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

const time = z.number().int().nullable()

export const BatchObject = z.object({
  id: z.string(),
  object: z.literal('batch'),
  endpoint: z.string(),
  model: z.string().nullable(),
  errors: z
    .object({
      object: z.literal('list'),
      data: z.array(
        z.object({
          code: z.string(),
          message: z.string(),
          param: z.string().nullable(),
          line: z.number().int().nullable(),
        }),
      ),
    })
    .nullable(),
  input_file_id: z.string(),
  completion_window: z.string(),
  status: z.enum(BATCH_STATUSES),
  output_file_id: z.string().nullable(),
  error_file_id: z.string().nullable(),
  created_at: z.number().int(),
  in_progress_at: time,
  expires_at: time,
  finalizing_at: time,
  completed_at: time,
  failed_at: time,
  expired_at: time,
  cancelling_at: time,
  cancelled_at: time,
  request_counts: z.object({ total: z.number().int(), completed: z.number().int(), failed: z.number().int() }),
  usage: z.object({ input_tokens: z.number().int(), output_tokens: z.number().int(), total_tokens: z.number().int() }),
  metadata: z.record(z.string(), z.string()).nullable(),
})

/** A batch as the API shows it (OpenAI's Batch object). */
export function batchView(record: BatchRecord): Record<string, unknown> {
  // A cancel asked of a batch still running reads "cancelling" until the runner ends it.
  const status =
    record.cancelAt !== null && (record.status === 'in_progress' || record.status === 'validating')
      ? 'cancelling'
      : record.status
  const { inputTokens, outputTokens } = record.usage
  return {
    id: record.id,
    object: 'batch',
    endpoint: record.endpointPath,
    model: record.model,
    errors: record.errors === null ? null : { object: 'list', data: record.errors },
    input_file_id: record.inputFileId,
    completion_window: record.completionWindow,
    status,
    output_file_id: record.outputFileId,
    error_file_id: record.errorFileId,
    created_at: seconds(record.createdAt),
    in_progress_at: seconds(record.inProgressAt),
    expires_at: seconds(record.expiresAt),
    finalizing_at: seconds(record.finalizingAt),
    completed_at: seconds(record.completedAt),
    failed_at: seconds(record.failedAt),
    expired_at: seconds(record.expiredAt),
    cancelling_at: seconds(record.cancelAt),
    cancelled_at: seconds(record.cancelledAt),
    request_counts: record.counts,
    usage: {
      input_tokens: inputTokens,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: inputTokens + outputTokens,
    },
    metadata: record.metadata,
  }
}

export const BatchList = listOf(BatchObject)
