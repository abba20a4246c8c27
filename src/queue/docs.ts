// The /queue routes and /admin/queue in the OpenAPI document: the inference endpoints as
// their /v2 twins are documented (same bodies, same replies) plus the 202 of
// `Prefer: respond-async`, and the stored requests' own routes.
import { inferenceOperations, modelOperations } from '../inference/docs.ts'
import { PROXIED_ENDPOINTS } from '../inference/endpoints.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import { listRequestsQuery, QUEUED_ENDPOINTS, QueueLines, QueueRequest, QueueRequestList } from './api.ts'

export { QueueRequest } from './api.ts'

const TAG = 'Queue'
const ADMIN_TAG = 'Admin: queue'

const ASYNC =
  'Waits in the line of its key and model until the limits admit it, then runs as on /v2 (never a 429 for lack of capacity; ' +
  '504 `queue_timeout` after `queue.maxWaitMs`). With `Prefer: respond-async`: 202, stored, and run later (GET /queue/requests/{id}); ' +
  'a key keeps at most `storageCaps.queuedRequests` stored requests (and `queuedBytes` of their bodies) not yet finished, per tier: past that, ' +
  '429 `queue_full` with `retry-after`.'

const request = { id: "A stored request's id (`qreq_…`)." }

export function queueOperations(): OperationDoc[] {
  const specs = PROXIED_ENDPOINTS.filter((s) => s.method === 'POST' && QUEUED_ENDPOINTS.has(s.endpoint))
  const calls = inferenceOperations('/queue', specs, { idPrefix: 'queue' }).map((op): OperationDoc => ({
    ...op,
    tag: TAG,
    description: `${ASYNC} ${op.description ?? ''}`.trim(),
    responses: {
      ...op.responses,
      202: { description: 'Accepted (Prefer: respond-async); `Location` names the request.', schema: QueueRequest },
    },
  }))
  const models = modelOperations('/queue')
    .filter((op) => !op.path.endsWith('/audio/models'))
    .map((op): OperationDoc => ({
      ...op,
      tag: TAG,
      operationId: `queue${op.operationId.charAt(0).toUpperCase()}${op.operationId.slice(1)}`,
    }))
  const common = { tag: TAG, security: 'apiKey', rateLimited: true } as const
  return [
    ...calls,
    ...models,
    {
      ...common,
      method: 'get',
      path: '/queue/requests',
      operationId: 'listQueueRequests',
      summary: 'List your stored requests',
      description:
        'Newest first; those of every key of the same owner. With `status`, every page is full while more match, and `has_more` says exactly whether more do.',
      query: listRequestsQuery,
      responses: { 200: { description: 'OK', schema: QueueRequestList } },
    },
    {
      ...common,
      method: 'get',
      path: '/queue/requests/{id}',
      operationId: 'retrieveQueueRequest',
      summary: 'Retrieve a stored request: its status, and its reply once done',
      description: 'Only keys of the owner that submitted it see it; to any other it does not exist (404).',
      pathParams: request,
      responses: { 200: { description: 'OK', schema: QueueRequest } },
    },
    {
      ...common,
      method: 'delete',
      path: '/queue/requests/{id}',
      operationId: 'cancelQueueRequest',
      summary: 'Cancel a stored request',
      description:
        'A queued request never runs; a running one has its upstream call aborted, the tokens so far charged. A finished one: 409.',
      pathParams: request,
      responses: { 200: { description: 'OK', schema: QueueRequest } },
    },
  ]
}

export const QUEUE_ADMIN_OPERATIONS: readonly OperationDoc[] = [
  {
    security: 'admin',
    method: 'get',
    path: '/admin/queue',
    operationId: 'listQueueLines',
    tag: ADMIN_TAG,
    summary: 'The lines with calls waiting',
    description: 'Depth and oldest wait per key and model, across every instance.',
    responses: { 200: { description: 'OK', schema: QueueLines } },
  },
  {
    security: 'admin',
    method: 'get',
    path: '/admin/queue/requests/{id}',
    operationId: 'adminRetrieveQueueRequest',
    tag: ADMIN_TAG,
    summary: 'Retrieve any stored request',
    pathParams: request,
    responses: { 200: { description: 'OK', schema: QueueRequest } },
  },
  {
    security: 'admin',
    method: 'delete',
    path: '/admin/queue/requests/{id}',
    operationId: 'adminCancelQueueRequest',
    tag: ADMIN_TAG,
    summary: 'Cancel any stored request',
    pathParams: request,
    responses: { 200: { description: 'OK', schema: QueueRequest } },
  },
]
