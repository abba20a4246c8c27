// /admin/webhooks: the endpoints events are delivered to (create, list, read, change,
// delete, a new secret, a test event), each endpoint's delivery history and the replay of
// a delivery. The secret is in the reply of create and of rotate-secret only.
import { z } from 'zod'
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { Config } from '../config/schema.ts'
import { EVENT_TYPES } from '../events/types.ts'
import { gatewayError } from '../errors.ts'
import { readJsonBody } from '../http/body.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { parseQuery } from '../http/query.ts'
import type { Router } from '../http/router.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import type { Webhooks } from '../webhooks/create.ts'
import {
  attemptView,
  createWebhookSchema,
  deliveriesQuery,
  deliveryView,
  endpointView,
  updateWebhookSchema,
} from '../webhooks/endpoints.ts'
import { sendAdmin } from './http.ts'

export interface WebhookAdminDeps {
  readonly config: Pick<Config, 'server'>
  readonly authenticateAdmin: AdminAuthenticator
  /** Absent: /admin/webhooks answers 404 (an embedder's gateway without events). */
  readonly webhooks?: Pick<Webhooks, 'endpoints' | 'dispatcher' | 'store'>
}

export function registerWebhookRoutes(router: Router, deps: WebhookAdminDeps): void {
  const { authenticateAdmin } = deps
  const limit = deps.config.server.jsonBodyLimitBytes
  const rate = bodyRateOf(deps.config.server)
  const hooks = (): Pick<Webhooks, 'endpoints' | 'dispatcher' | 'store'> => {
    if (deps.webhooks === undefined) throw gatewayError('resource_not_found', { message: 'Webhooks are not enabled.' })
    return deps.webhooks
  }

  router.on('POST', '/admin/webhooks', async (ctx) => {
    ctx.route = 'admin.webhooks.create'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const { endpoint, secret } = await hooks().endpoints.create(body.value)
    ctx.log.info({ audit: 'webhook.created', webhookId: endpoint.id }, 'admin: webhook endpoint created')
    sendAdmin(ctx, 201, { ...endpointView(endpoint), secret })
  })

  router.on('GET', '/admin/webhooks', async (ctx) => {
    ctx.route = 'admin.webhooks.list'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, { object: 'list', data: (await hooks().endpoints.list()).map(endpointView) })
  })

  router.on('GET', '/admin/webhooks/:id', async (ctx, params) => {
    ctx.route = 'admin.webhooks.get'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, endpointView(await hooks().endpoints.get(params.id ?? '')))
  })

  router.on('PATCH', '/admin/webhooks/:id', async (ctx, params) => {
    ctx.route = 'admin.webhooks.update'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const endpoint = await hooks().endpoints.update(params.id ?? '', body.value)
    ctx.log.info({ audit: 'webhook.updated', webhookId: endpoint.id }, 'admin: webhook endpoint updated')
    sendAdmin(ctx, 200, endpointView(endpoint))
  })

  router.on('DELETE', '/admin/webhooks/:id', async (ctx, params) => {
    ctx.route = 'admin.webhooks.delete'
    authenticateAdmin(ctx.req)
    const endpoint = await hooks().endpoints.remove(params.id ?? '')
    ctx.log.info({ audit: 'webhook.deleted', webhookId: endpoint.id }, 'admin: webhook endpoint deleted')
    sendAdmin(ctx, 200, { ...endpointView(endpoint), deleted: true })
  })

  router.on('POST', '/admin/webhooks/:id/rotate-secret', async (ctx, params) => {
    ctx.route = 'admin.webhooks.rotate_secret'
    authenticateAdmin(ctx.req)
    const { endpoint, secret } = await hooks().endpoints.rotateSecret(params.id ?? '')
    ctx.log.info({ audit: 'webhook.secret_rotated', webhookId: endpoint.id }, 'admin: webhook secret rotated')
    sendAdmin(ctx, 200, { ...endpointView(endpoint), secret })
  })

  router.on('POST', '/admin/webhooks/:id/test', async (ctx, params) => {
    ctx.route = 'admin.webhooks.test'
    authenticateAdmin(ctx.req)
    const { endpoints, dispatcher } = hooks()
    const endpoint = await endpoints.get(params.id ?? '')
    const event = await dispatcher.publish('webhook.test', { endpoint_id: endpoint.id }, { endpointId: endpoint.id })
    sendAdmin(ctx, 202, { object: 'event', id: event?.id ?? null, type: 'webhook.test' })
  })

  router.on('GET', '/admin/webhooks/:id/deliveries', async (ctx, params, query) => {
    ctx.route = 'admin.webhooks.deliveries'
    authenticateAdmin(ctx.req)
    const page = parseQuery(deliveriesQuery, query)
    const { endpoints, store } = hooks()
    const endpoint = await endpoints.get(params.id ?? '')
    const found = await store.listDeliveries(endpoint.id, {
      limit: page.limit ?? 20,
      ...(page.after === undefined ? {} : { after: page.after }),
    })
    sendAdmin(ctx, 200, { object: 'list', data: found.data.map(deliveryView), has_more: found.hasMore })
  })

  router.on('GET', '/admin/webhooks/:id/deliveries/:delivery', async (ctx, params) => {
    ctx.route = 'admin.webhooks.delivery'
    authenticateAdmin(ctx.req)
    const { endpoints, store } = hooks()
    const delivery = await endpoints.delivery(params.id ?? '', params.delivery ?? '')
    const [attempts, event] = await Promise.all([store.attempts(delivery.id), store.getEvent(delivery.eventId)])
    sendAdmin(ctx, 200, { ...deliveryView(delivery), event, attempt_log: attempts.map(attemptView) })
  })

  router.on('POST', '/admin/webhooks/:id/deliveries/:delivery/replay', async (ctx, params) => {
    ctx.route = 'admin.webhooks.replay'
    authenticateAdmin(ctx.req)
    const { endpoints, dispatcher } = hooks()
    const delivery = await endpoints.delivery(params.id ?? '', params.delivery ?? '')
    const replayed = await dispatcher.replay(delivery.id)
    if (replayed === null)
      throw gatewayError('resource_not_found', { message: 'The event of this delivery is no longer kept.' })
    ctx.log.info(
      { audit: 'webhook.replayed', webhookId: delivery.endpointId, deliveryId: replayed.id },
      'admin: delivery replayed',
    )
    sendAdmin(ctx, 202, deliveryView(replayed))
  })
}

const TAG = 'Admin: webhooks'
const admin = { security: 'admin', tag: TAG } as const
const id = { id: 'The webhook endpoint id (`whe_…`).' }
const deliveryParams = { ...id, delivery: 'The delivery id (`whd_…`).' }

export const WebhookEndpoint = z
  .object({
    object: z.literal('webhook_endpoint'),
    id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    events: z
      .array(z.enum(EVENT_TYPES))
      .nullable()
      .meta({ description: 'The event types sent to it; null: every type.' }),
    enabled: z.boolean(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ description: 'Where events are delivered. Never its secret, but in the replies that make one.' })

const WithSecret = WebhookEndpoint.extend({
  secret: z.string().meta({
    description: '`whsec_…`: verifies the `webhook-signature` of every delivery (Standard Webhooks). Shown here only.',
  }),
})

export const WebhookDelivery = z.object({
  object: z.literal('webhook_delivery'),
  id: z.string(),
  endpoint_id: z.string(),
  event_id: z.string().meta({ description: 'The `webhook-id` header of every attempt: what a receiver dedupes on.' }),
  event_type: z.enum(EVENT_TYPES),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.int(),
  last_status: z.int().nullable().meta({ description: 'The HTTP status of the last answer, if any.' }),
  last_error: z.string().nullable(),
  next_attempt_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  replay_of: z.string().nullable(),
})

const DeliveryDetail = WebhookDelivery.extend({
  event: z
    .object({ id: z.string(), type: z.string(), timestamp: z.string(), data: z.record(z.string(), z.unknown()) })
    .nullable(),
  attempt_log: z.array(
    z.object({ at: z.string(), status: z.int().nullable(), error: z.string().nullable(), duration_ms: z.int() }),
  ),
})

export const WEBHOOK_OPERATIONS: readonly OperationDoc[] = [
  {
    ...admin,
    method: 'post',
    path: '/admin/webhooks',
    operationId: 'createWebhook',
    summary: 'Create a webhook endpoint',
    description:
      'Events of the types in `events` (all when left out) are POSTed to `url`, signed in the Standard Webhooks format with the `secret` of this reply (shown once). A URL whose host is a loopback, private, link-local or multicast IP address is refused unless `webhooks.allowAddresses` allows it; a host name is checked at every delivery.',
    body: { contentType: 'application/json', schema: createWebhookSchema },
    responses: { 201: { description: 'Created, with its secret', schema: WithSecret } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/webhooks',
    operationId: 'listWebhooks',
    summary: 'List webhook endpoints',
    responses: {
      200: {
        description: 'OK, oldest first',
        schema: z.object({ object: z.literal('list'), data: z.array(WebhookEndpoint) }),
      },
    },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/webhooks/{id}',
    operationId: 'retrieveWebhook',
    summary: 'Retrieve a webhook endpoint',
    pathParams: id,
    responses: { 200: { description: 'OK', schema: WebhookEndpoint } },
  },
  {
    ...admin,
    method: 'patch',
    path: '/admin/webhooks/{id}',
    operationId: 'updateWebhook',
    summary: 'Change a webhook endpoint',
    description:
      'URL, event types, description, enabled; a field left out stays. A disabled endpoint keeps its deliveries pending.',
    pathParams: id,
    body: { contentType: 'application/json', schema: updateWebhookSchema },
    responses: { 200: { description: 'OK', schema: WebhookEndpoint } },
  },
  {
    ...admin,
    method: 'delete',
    path: '/admin/webhooks/{id}',
    operationId: 'deleteWebhook',
    summary: 'Delete a webhook endpoint',
    description: 'Its pending deliveries are dropped with its history.',
    pathParams: id,
    responses: {
      200: { description: 'The deleted endpoint', schema: WebhookEndpoint.extend({ deleted: z.literal(true) }) },
    },
  },
  {
    ...admin,
    method: 'post',
    path: '/admin/webhooks/{id}/rotate-secret',
    operationId: 'rotateWebhookSecret',
    summary: 'Give a webhook endpoint a new secret',
    description: 'Deliveries from now on are signed with the new secret only.',
    pathParams: id,
    responses: { 200: { description: 'OK, with the new secret', schema: WithSecret } },
  },
  {
    ...admin,
    method: 'post',
    path: '/admin/webhooks/{id}/test',
    operationId: 'testWebhook',
    summary: 'Send a test event',
    description:
      'A `webhook.test` event, to this endpoint only, whatever its filters; its delivery shows in the history.',
    pathParams: id,
    responses: {
      202: {
        description: 'Stored; it is delivered by a worker',
        schema: z.object({ object: z.literal('event'), id: z.string().nullable(), type: z.literal('webhook.test') }),
      },
    },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/webhooks/{id}/deliveries',
    operationId: 'listWebhookDeliveries',
    summary: "An endpoint's delivery history",
    description:
      "Newest first, with each delivery's status, attempts and the last HTTP status seen. Page with `after` (the last id of a page).",
    pathParams: id,
    query: deliveriesQuery,
    responses: {
      200: {
        description: 'OK',
        schema: z.object({ object: z.literal('list'), data: z.array(WebhookDelivery), has_more: z.boolean() }),
      },
    },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/webhooks/{id}/deliveries/{delivery}',
    operationId: 'retrieveWebhookDelivery',
    summary: 'One delivery, its event and every attempt',
    pathParams: deliveryParams,
    responses: { 200: { description: 'OK', schema: DeliveryDetail } },
  },
  {
    ...admin,
    method: 'post',
    path: '/admin/webhooks/{id}/deliveries/{delivery}/replay',
    operationId: 'replayWebhookDelivery',
    summary: 'Deliver an event again',
    description: 'A new delivery of the same event (same `webhook-id`) to the endpoint, now, with retries of its own.',
    pathParams: deliveryParams,
    responses: { 202: { description: 'The new delivery', schema: WebhookDelivery } },
  },
]
