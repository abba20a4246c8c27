// My keys: the list, create, one key with its limits, rotate and revoke. Every change goes
// through the KeyService the admin API uses; the user's keys are those whose owner is the
// user's account id.
import { gatewayError } from '../errors.ts'
import type { KeyRecord } from '../keys/record.ts'
import type { Guards, PortalDeps, PortalRouter } from './guard.ts'
import { redirect, sendHtml } from './http.ts'
import { html } from './html.ts'
import { lastUsedDays } from './last-used.ts'
import { keyStanding } from './limits-view.ts'
import { notice } from './layout.ts'
import { when } from './pages/format.ts'
import { keyPage } from './pages/key.ts'
import { keysPage, secretPage, type KeyRow } from './pages/keys.ts'

/** Newest first. */
export const byNewest = (a: KeyRecord, b: KeyRecord): number => b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id)

export async function keyRows(deps: PortalDeps, records: readonly KeyRecord[]): Promise<KeyRow[]> {
  const last = await lastUsedDays(deps, new Set(records.map((r) => r.id)))
  return [...records].sort(byNewest).map((r) => ({ view: deps.keys.view(r), lastUsed: last.get(r.id) ?? null }))
}

/** A date field (YYYY-MM-DD) as the end of that UTC day; empty is no expiry. */
function expiryOf(value: string | null): string | undefined {
  if (value === null || value === '') return undefined
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) throw gatewayError('invalid_body', { message: 'The expiry must be a date.', param: 'expires' })
  return `${value}T23:59:59Z`
}

function graceOf(form: URLSearchParams): number {
  const preset = form.get('grace_preset') ?? '0'
  const text = preset === 'custom' ? (form.get('grace_seconds') ?? '').trim() : preset
  if (!/^\d{1,9}$/.test(text)) throw gatewayError('invalid_body', { message: 'The grace period is a whole number of seconds.', param: 'grace_seconds' })
  return Number(text)
}

export function registerKeyRoutes(router: PortalRouter, deps: PortalDeps, guards: Guards): void {
  const { keys, config } = deps

  router.on('GET', '/portal/keys', guards.page('portal.keys', async (ctx, me, _params, query) => {
    const rows = await keyRows(deps, await keys.list({ owner: me.account.id }))
    sendHtml(ctx.res, 200, keysPage(me.viewer, rows, query, config.portal.pageSize))
  }))

  router.on('POST', '/portal/keys', guards.form('portal.keys.create', async (ctx, me, form) => {
    const expires = expiryOf(form.get('expires'))
    const created = await keys.create({
      name: form.get('name') ?? '',
      owner: me.account.id,
      ...(expires === undefined ? {} : { expires_at: expires }),
    })
    ctx.keyId = created.record.id
    sendHtml(ctx.res, 201, secretPage(me.viewer, 'Your new key', keys.view(created.record), created.key))
  }))

  router.on('GET', '/portal/keys/:id', guards.page('portal.key', async (ctx, me, params) => {
    const record = await guards.keyOf(me, params.id ?? '')
    const [standing, last] = await Promise.all([keyStanding(config, deps.limiter, record), lastUsedDays(deps, new Set([record.id]))])
    sendHtml(ctx.res, 200, keyPage(me.viewer, keys.view(record), standing, last.get(record.id) ?? null))
  }))

  router.on('POST', '/portal/keys/:id/rotate', guards.form('portal.key.rotate', async (ctx, me, form, params) => {
    const record = await guards.keyOf(me, params.id ?? '')
    const grace = graceOf(form)
    const rotated = await keys.rotate(record.id, { grace_seconds: grace })
    const until = rotated.record.previousHashValidUntil
    const extra = until === null
      ? notice('ok', 'The old secret has stopped working.')
      : notice('ok', html`The old secret keeps working until <strong>${when(until)}</strong>, then stops.`)
    sendHtml(ctx.res, 200, secretPage(me.viewer, 'Your rotated key', keys.view(rotated.record), rotated.key, extra))
  }))

  router.on('POST', '/portal/keys/:id/revoke', guards.form('portal.key.revoke', async (ctx, me, form, params) => {
    const record = await guards.keyOf(me, params.id ?? '')
    if (form.get('confirm') !== 'yes') throw gatewayError('invalid_body', { message: 'Tick the box to confirm the revocation.', param: 'confirm' })
    await keys.revoke(record.id)
    redirect(ctx.res, `/portal/keys/${record.id}`)
  }))
}
