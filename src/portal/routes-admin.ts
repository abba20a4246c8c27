// The admin's pages (role `admin`): every key, filtered, with its tier; every user, made,
// disabled and enabled here. The same KeyService and AccountService as /admin.
import { KEY_STATUSES, type EffectiveKeyStatus } from '../keys/service.ts'
import type { Router } from '../http/router.ts'
import type { Guards, PortalDeps } from './guard.ts'
import { redirect, sendHtml } from './http.ts'
import { html } from './html.ts'
import { ADMIN_ROLE, notice } from './layout.ts'
import { adminKeysPage, adminUsersPage } from './pages/admin.ts'
import { keyRows } from './routes-keys.ts'

export function registerAdminPortalRoutes(router: Router, deps: PortalDeps, guards: Guards): void {
  const { keys, accounts, config } = deps

  router.on(
    'GET',
    '/portal/admin/keys',
    guards.page(
      'portal.admin.keys',
      async (ctx, me, _params, query) => {
        const users = await accounts.list()
        const usernames = new Map(users.map((u) => [u.id, u.username]))
        const tiers = Object.keys(deps.runtime.current.config.plans.tiers)
        const filter = {
          owner: (query.get('owner') ?? '').trim(),
          tier: query.get('tier') ?? '',
          status: query.get('status') ?? '',
        }
        const ownerId =
          filter.owner === '' ? undefined : (users.find((u) => u.username === filter.owner)?.id ?? filter.owner)
        const status = (KEY_STATUSES as readonly string[]).includes(filter.status)
          ? (filter.status as EffectiveKeyStatus)
          : undefined
        const records = await keys.list({
          ...(ownerId === undefined ? {} : { owner: ownerId }),
          ...(tiers.includes(filter.tier) ? { tier: filter.tier } : {}),
          ...(status === undefined ? {} : { status }),
        })
        sendHtml(
          ctx.res,
          200,
          adminKeysPage(
            me.viewer,
            await keyRows(deps, records),
            filter,
            tiers,
            usernames,
            query,
            config.portal.pageSize,
          ),
        )
      },
      { admin: true },
    ),
  )

  router.on(
    'POST',
    '/portal/admin/keys/:id/tier',
    guards.form(
      'portal.admin.key.tier',
      async (ctx, _me, form, params) => {
        await keys.update(params.id ?? '', { tier: form.get('tier') ?? '' })
        redirect(ctx.res, '/portal/admin/keys')
      },
      { admin: true },
    ),
  )

  router.on(
    'GET',
    '/portal/admin/users',
    guards.page(
      'portal.admin.users',
      async (ctx, me, _params, query) => {
        const users = (await accounts.list()).map((u) => accounts.view(u))
        const created = query.get('created')
        const message =
          created !== null && users.some((u) => u.username === created)
            ? notice('ok', html`User <strong>${created}</strong> created.`)
            : undefined
        sendHtml(ctx.res, 200, adminUsersPage(me.viewer, users, query, config.portal.pageSize, message))
      },
      { admin: true },
    ),
  )

  router.on(
    'POST',
    '/portal/admin/users',
    guards.form(
      'portal.admin.users.create',
      async (ctx, _me, form) => {
        const created = await accounts.create({
          username: (form.get('username') ?? '').trim(),
          password: form.get('password') ?? '',
          roles: form.get('admin') === 'yes' ? [ADMIN_ROLE] : [],
        })
        // The page says who was made (and the audit log reads the name from here).
        redirect(ctx.res, `/portal/admin/users?created=${encodeURIComponent(created.username)}`)
      },
      { admin: true },
    ),
  )

  for (const [action, disabled] of [
    ['disable', true],
    ['enable', false],
  ] as const) {
    router.on(
      'POST',
      `/portal/admin/users/:username/${action}`,
      guards.form(
        `portal.admin.users.${action}`,
        async (ctx, _me, _form, params) => {
          await accounts.update(params.username ?? '', { disabled })
          redirect(ctx.res, '/portal/admin/users')
        },
        { admin: true },
      ),
    )
  }
}
