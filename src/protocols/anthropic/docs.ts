// The Messages API routes in the gateway's OpenAPI document. The schemas name the members
// the gateway reads and let the rest through, as /v2's do; what each member becomes
// upstream, and what is refused, is docs/anthropic.md's.
import { z } from 'zod'
import type { OperationDoc } from '../../openapi/operation.ts'
import { QueueRequest } from '../../queue/api.ts'

export const ANTHROPIC_TAG = 'Anthropic Messages'

const request = {
  model: z.string().meta({ description: 'A chat model the key may use (GET /v2/models).' }),
  messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content: z.unknown() }).loose()),
  system: z.union([z.string(), z.array(z.unknown())]).optional(),
  tools: z.array(z.unknown()).optional(),
}

const MessageRequest = z
  .object({
    ...request,
    max_tokens: z
      .int()
      .min(1)
      .meta({ description: 'Required, as in Anthropic’s API; the call reserves this many output tokens.' }),
    stream: z.boolean().optional().meta({ description: "Anthropic's server-sent events instead of one JSON reply." }),
  })
  .loose()
  .meta({ description: "Anthropic's Messages request (anthropic-version 2023-06-01)." })

const CountTokensRequest = z.object(request).loose()

const Message = z
  .object({
    id: z.string(),
    type: z.literal('message'),
    role: z.literal('assistant'),
    model: z.string(),
    content: z.array(z.object({ type: z.string() }).loose()),
    stop_reason: z.string().nullable(),
    usage: z.object({ input_tokens: z.int(), output_tokens: z.int() }).loose(),
  })
  .loose()

const TokensCount = z.object({ input_tokens: z.int() })

const ModelInfo = z.object({
  type: z.literal('model'),
  id: z.string(),
  display_name: z.string(),
  created_at: z.string().meta({ description: 'RFC 3339.' }),
})

const ModelPage = z.object({
  data: z.array(ModelInfo),
  first_id: z.string().nullable(),
  last_id: z.string().nullable(),
  has_more: z.boolean(),
})

const MODELS_ABOUT =
  'In Anthropic’s shape when the caller sends `anthropic-version` (Anthropic’s SDKs always do): the chat models the key may use. ' +
  'Without that header, the 404 of an inference path under /v1, which names GET /v2/models. Scope: `models.list` / `models.get`.'

const ABOUT =
  'Anthropic’s Messages API for its SDKs and Claude Code (`baseURL` the gateway’s root, the key as `x-api-key` or `Authorization: Bearer`). ' +
  'The call is a chat completion inside the gateway: the same scope (chat.completions), limits, budgets and metering. ' +
  'Errors are in Anthropic’s shape (`{"type":"error","error":{"type","message"},"request_id"}`), with a `request-id` header and the key’s limits as `anthropic-ratelimit-*` headers. See docs/anthropic.md.'

export const ANTHROPIC_OPERATIONS: readonly OperationDoc[] = [
  {
    method: 'post',
    path: '/v1/messages',
    operationId: 'anthropicMessages',
    summary: 'Create a message (Anthropic’s Messages API)',
    description: ABOUT,
    tag: ANTHROPIC_TAG,
    security: 'apiKey',
    body: { contentType: 'application/json', schema: MessageRequest },
    responses: { 200: { description: 'The message', schema: Message, streams: true } },
    rateLimited: true,
  },
  {
    method: 'post',
    path: '/v1/messages/count_tokens',
    operationId: 'anthropicCountTokens',
    summary: 'Count the tokens of a message’s prompt',
    description: 'The prompt’s tokens by the gateway’s tokenizer; nothing is sent upstream or charged.',
    tag: ANTHROPIC_TAG,
    security: 'apiKey',
    body: { contentType: 'application/json', schema: CountTokensRequest },
    responses: { 200: { description: 'The count', schema: TokensCount } },
    rateLimited: true,
  },
  {
    method: 'get',
    path: '/v1/models',
    operationId: 'anthropicListModels',
    summary: 'List the models the key may use (Anthropic’s shape)',
    description: MODELS_ABOUT,
    tag: ANTHROPIC_TAG,
    security: 'apiKey',
    query: z.object({
      limit: z.string().optional().meta({ description: 'Models per page, 1 to 1000 (default 20).' }),
      after_id: z.string().optional().meta({ description: 'The page after this model.' }),
      before_id: z.string().optional().meta({ description: 'The page before this model.' }),
    }),
    responses: { 200: { description: 'One page of models', schema: ModelPage } },
    rateLimited: true,
  },
  {
    method: 'get',
    path: '/v1/models/{model_id}',
    operationId: 'anthropicRetrieveModel',
    summary: 'Retrieve a model (Anthropic’s shape)',
    description: MODELS_ABOUT,
    tag: ANTHROPIC_TAG,
    security: 'apiKey',
    pathParams: { model_id: 'A model name (may hold `/`).' },
    responses: { 200: { description: 'The model', schema: ModelInfo } },
    rateLimited: true,
  },
]

const QUEUED =
  'The same route under /queue (an SDK’s `baseURL` http://host/queue): it waits in the line of its key and model until the limits admit it ' +
  '(never a 429 for lack of capacity; 504 `timeout_error` after `queue.maxWaitMs`), streams included. With `Prefer: respond-async`: 202, stored, ' +
  'and run later; GET /queue/requests/{id} shows its reply in Anthropic’s shape (a message, a stream’s events as text, or an Anthropic error). See docs/queue.md.'

/** The routes' /queue twins (src/protocols/anthropic/routes.ts). */
export const ANTHROPIC_QUEUE_OPERATIONS: readonly OperationDoc[] = ANTHROPIC_OPERATIONS.map((op): OperationDoc => ({
  ...op,
  path: `/queue${op.path}`,
  operationId: `queue${op.operationId.charAt(0).toUpperCase()}${op.operationId.slice(1)}`,
  ...(op.path === '/v1/messages'
    ? {
        description: `${QUEUED} ${op.description ?? ''}`.trim(),
        responses: {
          ...op.responses,
          202: { description: 'Accepted (Prefer: respond-async); `Location` names the request.', schema: QueueRequest },
        },
      }
    : {}),
}))
