// The admin's audit page (/portal/admin/audit): the same log and the same query as
// GET /admin/audit, its filters from a form (dates are whole UTC days).
import { auditPage as readAuditPage } from '../audit/admin-route.ts'
import { AUDITED_ROUTES } from '../audit/declarations.ts'
import type { AuditLog } from '../audit/log.ts'
import type { AuditQuery } from '../audit/record.ts'
import { gatewayError } from '../errors.ts'
import type { Router } from '../http/router.ts'
import type { Guards, PortalDeps } from './guard.ts'
import { sendHtml } from './http.ts'
import { auditPage, type AuditPageFilter } from './pages/audit.ts'

const DAY_MS = 86_400_000
const ACTIONS = [...new Set(AUDITED_ROUTES.map((r) => r.action))].sort()
const OBJECT_TYPES = [...new Set(AUDITED_ROUTES.map((r) => r.subject))].sort()

function dayOf(value: string, param: string): number | undefined {
  if (value === '') return undefined
  const at = /^\d{4}-\d{2}-\d{2}$/.test(value) ? Date.parse(`${value}T00:00:00Z`) : Number.NaN
  if (Number.isNaN(at)) throw gatewayError('invalid_body', { message: 'A date is YYYY-MM-DD.', param })
  return at
}

export function registerAuditPortalRoutes(
  router: Router,
  deps: Pick<PortalDeps, 'config'> & { readonly audit: AuditLog },
  guards: Guards,
): void {
  router.on(
    'GET',
    '/portal/admin/audit',
    guards.page(
      'portal.admin.audit',
      async (ctx, me, _params, query) => {
        const field = (name: string): string => (query.get(name) ?? '').trim().slice(0, 200)
        const filter: AuditPageFilter = {
          actor: field('actor'),
          action: field('action'),
          object_type: field('object_type'),
          object_id: field('object_id'),
          since: field('since'),
          until: field('until'),
        }
        const since = dayOf(filter.since, 'since')
        const until = dayOf(filter.until, 'until')
        const after = field('after')
        const q: AuditQuery = {
          limit: deps.config.portal.pageSize,
          ...(after === '' ? {} : { after }),
          ...(filter.actor === '' ? {} : { actor: filter.actor }),
          ...(filter.action === '' ? {} : { action: filter.action }),
          ...(filter.object_type === '' ? {} : { objectType: filter.object_type }),
          ...(filter.object_id === '' ? {} : { objectId: filter.object_id }),
          ...(since === undefined ? {} : { since }),
          // "To" a day includes that whole day.
          ...(until === undefined ? {} : { until: until + DAY_MS }),
        }
        const page = await readAuditPage(deps.audit, q)
        const older = page.hasMore ? (page.data.at(-1)?.id ?? null) : null
        sendHtml(
          ctx.res,
          200,
          auditPage(me.viewer, page.data, filter, { actions: ACTIONS, objectTypes: OBJECT_TYPES }, older),
        )
      },
      { admin: true },
    ),
  )
}
