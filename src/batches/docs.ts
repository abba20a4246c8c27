// /v2/batches and /v1/batches in the OpenAPI document (OpenAI's Batch API).
import type { OperationDoc } from '../openapi/operation.ts'
import { BatchList, BatchObject, CreateBatchBody, listBatchesQuery } from './api.ts'

export const BATCHES_TAG = 'Batches'

const batch = { batch_id: "A batch's id (`batch_…`)." }

export function batchOperations(): OperationDoc[] {
  return ['/v2', '/v1'].flatMap((prefix): OperationDoc[] => {
    const common = { tag: BATCHES_TAG, security: 'apiKey', rateLimited: true } as const
    const id = (name: string): string => (prefix === '/v2' ? name : `v1${name.charAt(0).toUpperCase()}${name.slice(1)}`)
    return [
      {
        ...common,
        method: 'post',
        path: `${prefix}/batches`,
        operationId: id('createBatch'),
        summary: 'Create a batch from an uploaded file of requests',
        description:
          'The input file (purpose `batch`, the caller\'s own) holds one request per line (`custom_id`, `method` "POST", `url` the batch\'s endpoint, `body`). ' +
          "Each line runs as a stored /queue request of the key in the lowest class, behind its interactive calls: paced by its limits and budgets, on the capacity there is, metered once at its tier's batch price. " +
          'A file that fails validation ends the batch `failed`, with each error on its line. A key keeps a bounded number of unfinished batches, and the file a bounded size, per its tier (429 `batch_limit_exceeded`, 400 `invalid_file`).',
        body: { contentType: 'application/json', schema: CreateBatchBody },
        responses: { 200: { description: 'Created (status `validating`)', schema: BatchObject } },
      },
      {
        ...common,
        method: 'get',
        path: `${prefix}/batches`,
        operationId: id('listBatches'),
        summary: 'List your batches',
        description: 'Newest first; those of every key of the same owner.',
        query: listBatchesQuery,
        responses: { 200: { description: 'OK', schema: BatchList } },
      },
      {
        ...common,
        method: 'get',
        path: `${prefix}/batches/{batch_id}`,
        operationId: id('retrieveBatch'),
        summary: 'Retrieve a batch',
        description: 'Only keys of the owner that created it see it; to any other it does not exist (404).',
        pathParams: batch,
        responses: { 200: { description: 'OK', schema: BatchObject } },
      },
      {
        ...common,
        method: 'post',
        path: `${prefix}/batches/{batch_id}/cancel`,
        operationId: id('cancelBatch'),
        summary: 'Cancel a batch',
        description:
          'No further line starts; lines waiting in the queue are cancelled, those running finish. The batch reads `cancelling`, then `cancelled` with its output and error files. An ended batch: 409.',
        pathParams: batch,
        responses: { 200: { description: 'OK', schema: BatchObject } },
      },
    ]
  })
}
