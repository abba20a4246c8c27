// The objects a change can touch, each with the one way to read it for the log and the
// allow-list of fields kept: a field not named here (a key's hash or prefix, a password
// hash, a stored request's body or reply) never reaches a record, whatever a view grows.
import type { AccountService } from '../accounts/service.ts'
import { GatewayError } from '../errors.ts'
import { toUnits } from '../keys/money.ts'
import type { KeyService } from '../keys/service.ts'
import type { QueueService } from '../queue/service.ts'
import type { BudgetBook } from '../budgets/book.ts'
import type { BudgetRecord, BudgetScope } from '../budgets/port.ts'
import { deliveryView, endpointView } from '../webhooks/endpoints.ts'
import type { WebhookStore } from '../webhooks/port.ts'
import { pick, type AuditSnapshot } from './record.ts'

export interface AuditSubject {
  /** The object type the records name (`key`, `user`, ...). */
  readonly type: string
  /** The object as it stands, cut to its allow-list; null when there is none. */
  load(id: string): Promise<AuditSnapshot | null>
}

export const KEY_FIELDS = [
  'id',
  'name',
  'owner',
  'tier',
  'models',
  'endpoints',
  'limits',
  'status',
  'created_at',
  'updated_at',
  'expires_at',
  'revoked_at',
  'rotation_grace_until',
] as const

/** sessions_valid_from moves when the password changes: the change shows, the password never. */
export const USER_FIELDS = [
  'id',
  'username',
  'roles',
  'groups',
  'tenant',
  'disabled',
  'created_at',
  'updated_at',
  'sessions_valid_from',
] as const

export const QUEUE_REQUEST_FIELDS = [
  'id',
  'status',
  'key_id',
  'endpoint',
  'model',
  'attempts',
  'created_at',
  'started_at',
  'completed_at',
  'expires_at',
] as const

// Budgets and webhooks are kept in the API's names (`amount` in currency units, `time_zone`,
// `created_at`), as `PUT /admin/budgets` and `GET /admin/webhooks` speak them.
/** What was set (null time_zone or thresholds: the configured default), not what was spent. */
export const BUDGET_FIELDS = [
  'scope',
  'id',
  'amount',
  'period',
  'time_zone',
  'thresholds',
  'revision',
  'updated_at',
] as const

/** An endpoint's secret is never among them: rotating it shows as a new updated_at only. */
export const WEBHOOK_FIELDS = ['id', 'url', 'description', 'events', 'enabled', 'created_at', 'updated_at'] as const

export const WEBHOOK_DELIVERY_FIELDS = [
  'id',
  'endpoint_id',
  'event_id',
  'event_type',
  'status',
  'attempts',
  'last_status',
  'replay_of',
] as const

/** A budget as it was set, in the names of the admin API. */
function budgetSetting(record: BudgetRecord): Record<string, unknown> {
  return {
    scope: record.scope,
    id: record.id,
    amount: toUnits(record.amountNanos),
    period: record.period,
    time_zone: record.timeZone,
    thresholds: record.thresholds,
    revision: record.revision,
    updated_at: record.updatedAt,
  }
}

export const CONFIG_FIELDS = ['hash', 'plans_hash', 'loaded_at'] as const

export interface SubjectDeps {
  readonly keys: Pick<KeyService, 'get' | 'view'>
  readonly accounts: Pick<AccountService, 'get' | 'view'>
  readonly queue?: Pick<QueueService, 'read'>
  readonly budgets?: Pick<BudgetBook, 'get'>
  readonly webhooks?: Pick<WebhookStore, 'getEndpoint' | 'getDelivery'>
  /** The configuration in force, by its hashes (runtime/snapshot.ts). */
  readonly config?: () => { readonly hash: string; readonly plansHash: string | null; readonly loadedAt: number }
}

const absent = (err: unknown): null => {
  if (err instanceof GatewayError && err.status === 404) return null
  throw err
}

export function auditSubjects(deps: SubjectDeps): Readonly<Record<string, AuditSubject>> {
  return {
    key: {
      type: 'key',
      async load(id) {
        const record = await deps.keys.get(id)
        return record === null ? null : pick({ ...deps.keys.view(record) }, KEY_FIELDS)
      },
    },
    user: {
      type: 'user',
      async load(username) {
        const record = await deps.accounts.get(username)
        if (record === null) return null
        return pick({ ...deps.accounts.view(record), sessions_valid_from: record.sessionsValidFrom }, USER_FIELDS)
      },
    },
    queue_request: {
      type: 'queue_request',
      async load(id) {
        if (deps.queue === undefined) return null
        const view = await deps.queue.read(id).catch(absent)
        return view === null ? null : pick(view, QUEUE_REQUEST_FIELDS)
      },
    },
    budget: {
      type: 'budget',
      async load(scopeAndId) {
        const slash = scopeAndId.indexOf('/')
        const record = deps.budgets?.get(scopeAndId.slice(0, slash) as BudgetScope, scopeAndId.slice(slash + 1))
        return record === undefined ? null : pick(budgetSetting(record), BUDGET_FIELDS)
      },
    },
    webhook: {
      type: 'webhook',
      async load(id) {
        const endpoint = await deps.webhooks?.getEndpoint(id)
        return endpoint == null ? null : pick({ ...endpointView(endpoint) }, WEBHOOK_FIELDS)
      },
    },
    webhook_delivery: {
      type: 'webhook_delivery',
      async load(id) {
        const delivery = await deps.webhooks?.getDelivery(id)
        return delivery == null ? null : pick({ ...deliveryView(delivery) }, WEBHOOK_DELIVERY_FIELDS)
      },
    },
    // Sealed replies: nothing of them is shown; the record says a purge happened, and when.
    response_cache: { type: 'response_cache', load: async () => null },
    config: {
      type: 'config',
      async load() {
        if (deps.config === undefined) return null
        const { hash, plansHash, loadedAt } = deps.config()
        // As GET /admin/reload shows them.
        return pick({ hash, plans_hash: plansHash, loaded_at: new Date(loadedAt).toISOString() }, CONFIG_FIELDS)
      },
    },
  }
}
