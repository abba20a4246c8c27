// My keys: the list, create, one key with its limits, rotate and revoke. Every change goes
// through the KeyService the admin API uses; the user's keys are those whose owner is the
// user's account id.
import { gatewayError } from '../errors.ts'
import { planCurrency } from '../keys/money.ts'
import type { KeyRecord } from '../keys/record.ts'
import type { Router } from '../http/router.ts'
import type { Guards, PortalDeps } from './guard.ts'
import { apiBaseUrl, redirect, sendHtml } from './http.ts'
import { html } from './html.ts'
import { lastUsedDays } from './last-used.ts'
import { budgetsOf, keyStanding } from './limits-view.ts'
import { notice } from './layout.ts'
import { when } from './pages/format.ts'
import { keyPage } from './pages/key.ts'
import { keysPage, secretGonePage, secretPage, type KeyRow } from './pages/keys.ts'

/** Newest first. */
export const byNewest = (a: KeyRecord, b: KeyRecord): number =>
  b.createdAt.localeCompare(a.createdAt) || a.id.localeCompare(b.id)

export async function keyRows(deps: PortalDeps, records: readonly KeyRecord[]): Promise<KeyRow[]> {
  const last = await lastUsedDays(deps, new Set(records.map((r) => r.id)))
  return [...records].sort(byNewest).map((r) => ({ view: deps.keys.view(r), lastUsed: last.get(r.id) ?? null }))
}

/** A date field (YYYY-MM-DD) as the end of that UTC day; empty is no expiry. */
function expiryOf(value: string | null): string | undefined {
  if (value === null || value === '') return undefined
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value))
    throw gatewayError('invalid_body', { message: 'The expiry must be a date.', param: 'expires' })
  return `${value}T23:59:59Z`
}

function graceOf(form: URLSearchParams): number {
  const preset = form.get('grace_preset') ?? '0'
  const text = preset === 'custom' ? (form.get('grace_seconds') ?? '').trim() : preset
  if (!/^\d{1,9}$/.test(text))
    throw gatewayError('invalid_body', {
      message: 'The grace period is a whole number of seconds.',
      param: 'grace_seconds',
    })
  return Number(text)
}

export function registerKeyRoutes(router: Router, deps: PortalDeps, guards: Guards): void {
  const { keys, config } = deps

  router.on(
    'GET',
    '/portal/keys',
    guards.page('portal.keys', async (ctx, me, _params, query) => {
      const rows = await keyRows(deps, await keys.list({ owner: me.account.id }))
      sendHtml(ctx.res, 200, keysPage(me.viewer, rows, query, config.portal.pageSize))
    }),
  )

  // Create and rotate answer 303 to the key's secret page (post/redirect/get): reloading
  // that page re-sends no form, so it makes no second key and rotates nothing again. The
  // secret waits for that page in the session's hand-off (handoff.ts), for one read.
  router.on(
    'POST',
    '/portal/keys',
    guards.form('portal.keys.create', async (ctx, me, form) => {
      const expires = expiryOf(form.get('expires'))
      const created = await keys.create({
        name: form.get('name') ?? '',
        owner: me.account.id,
        ...(expires === undefined ? {} : { expires_at: expires }),
      })
      ctx.keyId = created.record.id
      await deps.sessions.handoffs.give(me.cookie, me.session.id, created.record.id, {
        kind: 'created',
        secret: created.key,
      })
      redirect(ctx.res, `/portal/keys/${created.record.id}/secret`)
    }),
  )

  router.on(
    'GET',
    '/portal/keys/:id',
    guards.page('portal.key', async (ctx, me, params) => {
      const record = await guards.keyOf(me, params.id ?? '')
      const view = keys.view(record)
      // Only a key that can still be used has a current window worth showing.
      const live = view.status === 'active'
      const [standing, last, budgets] = await Promise.all([
        keyStanding(deps.runtime.current.config, deps.limiter, record, { live }),
        lastUsedDays(deps, new Set([record.id])),
        live ? budgetsOf(deps, [record]) : [],
      ])
      sendHtml(
        ctx.res,
        200,
        keyPage(
          me.viewer,
          view,
          standing,
          last.get(record.id) ?? null,
          planCurrency(deps.runtime.current.config.plans),
          budgets,
        ),
      )
    }),
  )

  router.on(
    'POST',
    '/portal/keys/:id/rotate',
    guards.form('portal.key.rotate', async (ctx, me, form, params) => {
      const record = await guards.keyOf(me, params.id ?? '')
      const grace = graceOf(form)
      const rotated = await keys.rotate(record.id, { grace_seconds: grace })
      await deps.sessions.handoffs.give(me.cookie, me.session.id, record.id, { kind: 'rotated', secret: rotated.key })
      redirect(ctx.res, `/portal/keys/${record.id}/secret`)
    }),
  )

  // The secret, once. Opened again (a reload, the back button, a second tab) it is gone:
  // the page says so and offers rotation, the only way to a new secret.
  router.on(
    'GET',
    '/portal/keys/:id/secret',
    guards.page('portal.key.secret', async (ctx, me, params) => {
      const record = await guards.keyOf(me, params.id ?? '')
      const view = keys.view(record)
      const handoff = await deps.sessions.handoffs.take(me.cookie, me.session.id, record.id)
      if (handoff === null) return sendHtml(ctx.res, 200, secretGonePage(me.viewer, view))
      const shown = { secret: handoff.secret, baseUrl: apiBaseUrl(ctx.req, deps.config) }
      if (handoff.kind === 'created') return sendHtml(ctx.res, 200, secretPage(me.viewer, 'Your new key', view, shown))
      const until = view.rotation_grace_until
      const extra =
        until === null
          ? notice('ok', 'The old secret has stopped working.')
          : notice('ok', html`The old secret keeps working until <strong>${when(until)}</strong>, then stops.`)
      sendHtml(ctx.res, 200, secretPage(me.viewer, 'Your rotated key', view, shown, extra))
    }),
  )

  router.on(
    'POST',
    '/portal/keys/:id/revoke',
    guards.form('portal.key.revoke', async (ctx, me, form, params) => {
      const record = await guards.keyOf(me, params.id ?? '')
      if (form.get('confirm') !== 'yes')
        throw gatewayError('invalid_body', { message: 'Tick the box to confirm the revocation.', param: 'confirm' })
      await keys.revoke(record.id)
      redirect(ctx.res, `/portal/keys/${record.id}`)
    }),
  )
}
