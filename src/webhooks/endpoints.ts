// Webhook endpoints: create, change, remove, and their views. The secret is made here,
// shown in the reply of create (and of a secret rotation) only, and never logged.
import { isIP } from 'node:net'
import { z } from 'zod'
import { EVENT_TYPES, type EventType } from '../events/types.ts'
import { gatewayError } from '../errors.ts'
import { parseBody } from '../keys/service.ts'
import type { AddressGuard } from './address-guard.ts'
import { newId } from './dispatcher.ts'
import type { Attempt, Delivery, WebhookEndpoint, WebhookStore } from './port.ts'
import { generateSecret } from './signing.ts'

const ENDPOINT_ID = /^whe_[0-9a-f]{24}$/
const DELIVERY_ID = /^whd_[0-9a-f]{24}$/

const eventTypes = z
  .array(z.enum(EVENT_TYPES as unknown as [EventType, ...EventType[]]))
  .min(1)
  .max(EVENT_TYPES.length)

export const createWebhookSchema = z.strictObject({
  url: z.string().min(1).max(2048),
  /** The event types to send; left out or null: every type. */
  events: eventTypes.nullish(),
  description: z.string().trim().min(1).max(500).nullish(),
  enabled: z.boolean().optional(),
})

export const updateWebhookSchema = createWebhookSchema.partial()

export const deliveriesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).optional(),
  after: z.string().regex(DELIVERY_ID, 'a delivery id (whd_…)').optional(),
})

export interface EndpointView {
  readonly object: 'webhook_endpoint'
  readonly id: string
  readonly url: string
  readonly description: string | null
  readonly events: readonly EventType[] | null
  readonly enabled: boolean
  readonly created_at: string
  readonly updated_at: string
}

export interface DeliveryView {
  readonly object: 'webhook_delivery'
  readonly id: string
  readonly endpoint_id: string
  readonly event_id: string
  readonly event_type: EventType
  readonly status: Delivery['status']
  readonly attempts: number
  readonly last_status: number | null
  readonly last_error: string | null
  readonly next_attempt_at: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly replay_of: string | null
}

const iso = (ms: number): string => new Date(ms).toISOString()

export function endpointView(e: WebhookEndpoint): EndpointView {
  return {
    object: 'webhook_endpoint',
    id: e.id,
    url: e.url,
    description: e.description,
    events: e.eventTypes,
    enabled: e.enabled,
    created_at: e.createdAt,
    updated_at: e.updatedAt,
  }
}

export function deliveryView(d: Delivery): DeliveryView {
  return {
    object: 'webhook_delivery',
    id: d.id,
    endpoint_id: d.endpointId,
    event_id: d.eventId,
    event_type: d.eventType,
    status: d.status,
    attempts: d.attempts,
    last_status: d.lastStatus,
    last_error: d.lastError,
    next_attempt_at: d.nextAttemptAt === null ? null : iso(d.nextAttemptAt),
    created_at: iso(d.createdAt),
    updated_at: iso(d.updatedAt),
    replay_of: d.replayOf,
  }
}

export function attemptView(a: Attempt): {
  at: string
  status: number | null
  error: string | null
  duration_ms: number
} {
  return { at: iso(a.at), status: a.status, error: a.error, duration_ms: Math.round(a.durationMs) }
}

/**
 * An http(s) URL without credentials in it. A host given as an IP address must pass the
 * guard now; a host name is resolved and checked at every delivery (its addresses may change).
 */
export function checkUrl(raw: string, guard: AddressGuard): string {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw gatewayError('webhook_url_refused', { message: 'The webhook URL is not a URL.', param: 'url' })
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw gatewayError('webhook_url_refused', { message: 'A webhook URL must be http or https.', param: 'url' })
  if (url.username !== '' || url.password !== '')
    throw gatewayError('webhook_url_refused', {
      message: 'A webhook URL may not carry credentials; the signature authenticates the gateway.',
      param: 'url',
    })
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  if (isIP(host) !== 0) {
    const refusal = guard.refusal(host)
    if (refusal !== null)
      throw gatewayError('webhook_url_refused', { message: `The webhook URL is refused: ${refusal}.`, param: 'url' })
  }
  return url.href
}

function notFound(): Error {
  return gatewayError('resource_not_found', { message: 'No such webhook endpoint.', param: 'id' })
}

export class WebhookEndpoints {
  readonly #store: WebhookStore
  readonly #guard: AddressGuard
  readonly #now: () => Date

  constructor(store: WebhookStore, guard: AddressGuard, now: () => Date = () => new Date()) {
    this.#store = store
    this.#guard = guard
    this.#now = now
  }

  async create(input: unknown): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const body = parseBody(createWebhookSchema, input)
    const now = this.#now().toISOString()
    const endpoint: WebhookEndpoint = {
      id: newId('whe'),
      url: checkUrl(body.url, this.#guard),
      description: body.description ?? null,
      eventTypes: body.events ? [...new Set(body.events)] : null,
      enabled: body.enabled ?? true,
      secret: generateSecret(),
      createdAt: now,
      updatedAt: now,
    }
    await this.#store.createEndpoint(endpoint)
    return { endpoint, secret: endpoint.secret }
  }

  list(): Promise<WebhookEndpoint[]> {
    return this.#store.listEndpoints()
  }

  async get(id: string): Promise<WebhookEndpoint> {
    const endpoint = ENDPOINT_ID.test(id) ? await this.#store.getEndpoint(id) : null
    if (endpoint === null) throw notFound()
    return endpoint
  }

  async update(id: string, input: unknown): Promise<WebhookEndpoint> {
    const body = parseBody(updateWebhookSchema, input)
    const current = await this.get(id)
    const next: WebhookEndpoint = {
      ...current,
      ...(body.url === undefined ? {} : { url: checkUrl(body.url, this.#guard) }),
      ...(body.description === undefined ? {} : { description: body.description }),
      ...(body.events === undefined ? {} : { eventTypes: body.events === null ? null : [...new Set(body.events)] }),
      ...(body.enabled === undefined ? {} : { enabled: body.enabled }),
      updatedAt: this.#now().toISOString(),
    }
    if (!(await this.#store.updateEndpoint(next))) throw notFound()
    return next
  }

  /** A new secret, at once: deliveries from now on are signed with it. */
  async rotateSecret(id: string): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
    const current = await this.get(id)
    const next = { ...current, secret: generateSecret(), updatedAt: this.#now().toISOString() }
    if (!(await this.#store.updateEndpoint(next))) throw notFound()
    return { endpoint: next, secret: next.secret }
  }

  async remove(id: string): Promise<WebhookEndpoint> {
    const current = await this.get(id)
    if (!(await this.#store.deleteEndpoint(id))) throw notFound()
    return current
  }

  /** A delivery of this endpoint, or 404. */
  async delivery(endpointId: string, deliveryId: string): Promise<Delivery> {
    const delivery = DELIVERY_ID.test(deliveryId) ? await this.#store.getDelivery(deliveryId) : null
    if (delivery === null || delivery.endpointId !== endpointId)
      throw gatewayError('resource_not_found', { message: 'No such delivery.', param: 'delivery_id' })
    return delivery
  }
}
