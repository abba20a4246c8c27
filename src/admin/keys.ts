// /admin/keys: create, list, read, update, rotate, revoke. The secret is in the reply of
// create and rotate only; no reply and no log line ever holds a hash or a secret.
import { z } from 'zod'
import { readJsonBody } from '../http/body.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { gatewayError } from '../errors.ts'
import type { KeyRecord } from '../keys/record.ts'
import { KEY_STATUSES, type EffectiveKeyStatus } from '../keys/service.ts'
import { parseQuery } from '../http/query.ts'
import type { Router } from '../http/router.ts'
import { readOptionalJson, sendAdmin } from './http.ts'
import type { AdminDeps } from './routes.ts'

export const listKeysQuery = z.strictObject({
  owner: z.string().min(1).max(200).optional(),
  tier: z.string().min(1).max(200).optional(),
  status: z.enum(KEY_STATUSES as [EffectiveKeyStatus, ...EffectiveKeyStatus[]]).optional(),
})

export function registerKeyRoutes(router: Router, deps: AdminDeps): void {
  const { keys, authenticateAdmin } = deps
  const limit = deps.config.server.jsonBodyLimitBytes
  const rate = bodyRateOf(deps.config.server)

  const find = async (id: string | undefined): Promise<KeyRecord> => {
    const record = await keys.get(id ?? '')
    if (record === null) throw gatewayError('resource_not_found', { message: 'No such key.', param: 'id' })
    return record
  }

  router.on('POST', '/admin/keys', async (ctx) => {
    ctx.route = 'admin.keys.create'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const created = await keys.create(body.value)
    ctx.keyId = created.record.id
    ctx.log.info(
      { audit: 'key.created', keyId: created.record.id, owner: created.record.owner, tier: created.record.tier },
      'admin: key created',
    )
    sendAdmin(ctx, 201, { ...keys.view(created.record), key: created.key })
  })

  router.on('GET', '/admin/keys', async (ctx, _params, query) => {
    ctx.route = 'admin.keys.list'
    authenticateAdmin(ctx.req)
    const filter = parseQuery(listKeysQuery, query)
    const records = await keys.list(filter)
    sendAdmin(ctx, 200, { object: 'list', data: records.map((r) => keys.view(r)) })
  })

  router.on('GET', '/admin/keys/:id', async (ctx, params) => {
    ctx.route = 'admin.keys.get'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, keys.view(await find(params.id)))
  })

  router.on('PATCH', '/admin/keys/:id', async (ctx, params) => {
    ctx.route = 'admin.keys.update'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const record = await keys.update(params.id ?? '', body.value)
    ctx.keyId = record.id
    ctx.log.info({ audit: 'key.updated', keyId: record.id, fields: Object.keys(body.value) }, 'admin: key updated')
    sendAdmin(ctx, 200, keys.view(record))
  })

  router.on('POST', '/admin/keys/:id/rotate', async (ctx, params) => {
    ctx.route = 'admin.keys.rotate'
    authenticateAdmin(ctx.req)
    const body = await readOptionalJson(ctx.req, limit, rate)
    const rotated = await keys.rotate(params.id ?? '', body)
    ctx.keyId = rotated.record.id
    ctx.log.info(
      { audit: 'key.rotated', keyId: rotated.record.id, graceUntil: rotated.record.previousHashValidUntil },
      'admin: key rotated',
    )
    sendAdmin(ctx, 200, { ...keys.view(rotated.record), key: rotated.key })
  })

  router.on('DELETE', '/admin/keys/:id', async (ctx, params) => {
    ctx.route = 'admin.keys.revoke'
    authenticateAdmin(ctx.req)
    const record = await keys.revoke(params.id ?? '')
    ctx.keyId = record.id
    ctx.log.info({ audit: 'key.revoked', keyId: record.id }, 'admin: key revoked')
    sendAdmin(ctx, 200, keys.view(record))
  })
}
