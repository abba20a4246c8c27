// The admin API in the OpenAPI document: every route registerAdminRoutes serves, with the
// schemas its handlers validate the body and the query with.
import { z } from 'zod'
import {
  ApiKey,
  ApiKeyList,
  ApiKeyWithSecret,
  BackendList,
  ConfigInForce,
  ConfigReload,
  ConfigReloadList,
  BudgetList,
  BudgetStatus,
  CachePurge,
  KeyUsage,
  OutputReservationList,
  TierList,
  Usage,
} from '../api/admin.ts'
import { setBudgetSchema } from './budgets.ts'
import { purgeCacheQuery } from './cache.ts'
import { createKeySchema, rotateKeySchema, updateKeySchema } from '../keys/service.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import { listKeysQuery } from './keys.ts'
import { reloadBodySchema } from './reload.ts'
import { reservationsQuery } from './reservations.ts'
import { keyUsageQuery, usageQuery } from './usage.ts'

const KEYS = 'Admin: keys'
const USAGE = 'Admin: usage and tiers'
export const BACKENDS_TAG = 'Admin: backends'
export const CONFIG_TAG = 'Admin: configuration'
export const BUDGETS_TAG = 'Admin: budgets'
const budgetTarget = {
  scope: '`key`, `owner` (every key of that owner) or `tenant` (every owner whose account is in it).',
  id: 'The key id (`key_…`), the owner, or the tenant.',
}
const key = { id: "The key's id (`key_…`)." }
const admin = { security: 'admin' } as const

export const ADMIN_OPERATIONS: readonly OperationDoc[] = [
  {
    ...admin,
    method: 'post',
    path: '/admin/keys',
    operationId: 'createKey',
    tag: KEYS,
    summary: 'Create an API key',
    description:
      'The secret is in this reply only; Tollgate keeps its keyed hash. A key without a tier is on the default tier.',
    body: { contentType: 'application/json', schema: createKeySchema },
    responses: { 201: { description: 'Created', schema: ApiKeyWithSecret } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/keys',
    operationId: 'listKeys',
    tag: KEYS,
    summary: 'List API keys',
    query: listKeysQuery,
    responses: { 200: { description: 'OK, oldest first', schema: ApiKeyList } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/keys/{id}',
    operationId: 'retrieveKey',
    tag: KEYS,
    summary: 'Retrieve an API key',
    pathParams: key,
    responses: { 200: { description: 'OK', schema: ApiKey } },
  },
  {
    ...admin,
    method: 'patch',
    path: '/admin/keys/{id}',
    operationId: 'updateKey',
    tag: KEYS,
    summary: 'Change an API key',
    description: 'A field left out stays; null resets it. The owner cannot change.',
    pathParams: key,
    body: { contentType: 'application/json', schema: updateKeySchema },
    responses: { 200: { description: 'OK', schema: ApiKey } },
  },
  {
    ...admin,
    method: 'post',
    path: '/admin/keys/{id}/rotate',
    operationId: 'rotateKey',
    tag: KEYS,
    summary: "Rotate an API key's secret",
    description: 'The previous secret works for `grace_seconds` more (default 0).',
    pathParams: key,
    body: { contentType: 'application/json', schema: rotateKeySchema, optional: true },
    responses: { 200: { description: 'OK', schema: ApiKeyWithSecret } },
  },
  {
    ...admin,
    method: 'delete',
    path: '/admin/keys/{id}',
    operationId: 'revokeKey',
    tag: KEYS,
    summary: 'Revoke an API key',
    pathParams: key,
    responses: { 200: { description: 'OK', schema: ApiKey } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/keys/{id}/usage',
    operationId: 'retrieveKeyUsage',
    tag: USAGE,
    summary: "One key's usage, per model and day",
    pathParams: key,
    query: keyUsageQuery,
    responses: { 200: { description: 'OK', schema: KeyUsage } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/usage',
    operationId: 'retrieveUsage',
    tag: USAGE,
    summary: 'Usage across keys, grouped',
    query: usageQuery,
    responses: { 200: { description: 'OK', schema: Usage } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/tiers',
    operationId: 'listTiers',
    tag: USAGE,
    summary: 'The plans in force',
    responses: { 200: { description: 'OK', schema: TierList } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/keys/{id}/reservations',
    operationId: 'getKeyOutputReservations',
    tag: USAGE,
    summary: 'What a call of the key that names no output cap reserves now, per model',
    description:
      'A call without max_tokens reserves, against tpm and output_tpm, a high quantile of what calls like it produced (the key × model sketch, else tier × model, else model), ' +
      'once the sketch has min_samples decayed observations; budgets and the quota keep the fixed reservation (docs/limits.md, "Learned output reservations").',
    pathParams: key,
    query: reservationsQuery,
    responses: { 200: { description: 'OK', schema: OutputReservationList } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/backends',
    operationId: 'listBackends',
    tag: BACKENDS_TAG,
    summary: "Each model's deployments and their capacity",
    description:
      'Per deployment: its backend, the model name its upstream knows, its capacity id, the limits the config declares (rpm, tpm, maxConcurrent, weight), ' +
      "and its state in the shared store: in flight, counted this window, what the upstream's x-ratelimit-* headers last said is left and until when, " +
      'and whether it cools down after a 429 or a 503 (docs/backends.md, "Deployment capacity").',
    responses: { 200: { description: 'OK, models and deployments in config order', schema: BackendList } },
  },
  {
    ...admin,
    method: 'post',
    path: '/admin/reload',
    operationId: 'reloadConfig',
    tag: CONFIG_TAG,
    summary: 'Reload the configuration file (this instance, or every instance on the Redis)',
    description:
      'The file is read again and validated whole, as at boot; calls in flight finish on the configuration they started with, new calls use the new one. ' +
      'Refused (422 config_invalid, 409 config_restart_required, 500 config_reload_failed) with each bad field or restart-only setting named, and the previous configuration stays in force. ' +
      'With `all`, every instance on the same Redis reloads and its answer is listed (200 whatever the outcomes) (docs/operating.md, "Live configuration").',
    body: { contentType: 'application/json', schema: reloadBodySchema },
    responses: {
      200: {
        description: "This instance's report (applied or unchanged), or with `all` the list of every instance's",
        schema: ConfigReload.or(ConfigReloadList),
      },
    },
  },
  {
    ...admin,
    method: 'delete',
    path: '/admin/cache',
    operationId: 'purgeResponseCache',
    tag: CONFIG_TAG,
    summary: 'Empty the response cache, of a tenant, a key or a model',
    description:
      'Removes the cached replies that match every filter given (none: all of them), on every instance that shares the store; the next identical call goes upstream again. ' +
      'Recorded in the audit log (docs/cache.md).',
    query: purgeCacheQuery,
    responses: { 200: { description: 'OK', schema: CachePurge } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/config',
    operationId: 'getConfig',
    tag: CONFIG_TAG,
    summary: 'The configuration file in force on this instance, by its sha256',
    responses: { 200: { description: 'OK', schema: ConfigInForce } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/budgets',
    operationId: 'listBudgets',
    tag: BUDGETS_TAG,
    summary: 'Every budget set, and where it stands',
    description: "Tier defaults (plans `budget`) are not listed here; a key's own are in GET /admin/keys/{id}/usage.",
    responses: { 200: { description: 'OK, by scope and id', schema: BudgetList } },
  },
  {
    ...admin,
    method: 'put',
    path: '/admin/budgets/{scope}/{id}',
    operationId: 'setBudget',
    tag: BUDGETS_TAG,
    summary: 'Set the budget of a key, an owner or a tenant',
    description:
      "A call is admitted only if its estimated cost fits every budget that applies; a spent budget answers 429 `insufficient_quota` until its period ends. Changing a budget keeps what was spent in the period and re-arms its thresholds (docs/budgets.md). A key's own budget replaces its tier's default.",
    pathParams: budgetTarget,
    body: { contentType: 'application/json', schema: setBudgetSchema },
    responses: { 200: { description: 'OK', schema: BudgetStatus } },
  },
  {
    ...admin,
    method: 'delete',
    path: '/admin/budgets/{scope}/{id}',
    operationId: 'clearBudget',
    tag: BUDGETS_TAG,
    summary: 'Clear the budget of a key, an owner or a tenant',
    description: "A key falls back to its tier's default budget, if the plans give one.",
    pathParams: budgetTarget,
    responses: {
      200: {
        description: 'OK',
        schema: z.object({
          object: z.literal('budget.deleted'),
          scope: z.enum(['key', 'owner', 'tenant']),
          id: z.string(),
          deleted: z.literal(true),
        }),
      },
    },
  },
]
