// GET /admin/audit: the log, filtered and a page at a time, newest first (docs/audit.md).
import type { z } from 'zod'
import type { AdminAuthenticator } from '../auth/admin.ts'
import { gatewayError } from '../errors.ts'
import { parseQuery } from '../http/query.ts'
import { sendJson } from '../http/reply.ts'
import type { Router } from '../http/router.ts'
import { auditEntryView, auditQuery } from './api.ts'
import type { AuditLog } from './log.ts'
import { AuditCursorError } from './port.ts'
import type { AuditPage, AuditQuery } from './record.ts'

/** The query string as the store's query (times in ms), the default page size 20. */
export function auditQueryOf(q: z.infer<typeof auditQuery>): AuditQuery {
  return {
    limit: q.limit ?? 20,
    ...(q.after === undefined ? {} : { after: q.after }),
    ...(q.actor === undefined ? {} : { actor: q.actor }),
    ...(q.action === undefined ? {} : { action: q.action }),
    ...(q.object_type === undefined ? {} : { objectType: q.object_type }),
    ...(q.object_id === undefined ? {} : { objectId: q.object_id }),
    ...(q.since === undefined ? {} : { since: Date.parse(q.since) }),
    ...(q.until === undefined ? {} : { until: Date.parse(q.until) }),
  }
}

/** A page of the log; a cursor the store never gave is the caller's 400. */
export async function auditPage(audit: AuditLog, query: AuditQuery): Promise<AuditPage> {
  try {
    return await audit.query(query)
  } catch (err) {
    if (err instanceof AuditCursorError)
      throw gatewayError('invalid_body', { message: 'after is not the id of an audit record.', param: 'after' })
    throw err
  }
}

export function registerAuditRoute(
  router: Router,
  deps: { readonly audit: AuditLog; readonly authenticateAdmin: AdminAuthenticator },
): void {
  router.on('GET', '/admin/audit', async (ctx, _params, query) => {
    ctx.route = 'admin.audit'
    deps.authenticateAdmin(ctx.req)
    const page = await auditPage(deps.audit, auditQueryOf(parseQuery(auditQuery, query)))
    const data = page.data.map(auditEntryView)
    sendJson(
      ctx.res,
      200,
      {
        object: 'list',
        data,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
        has_more: page.hasMore,
      },
      { 'cache-control': 'no-store' },
    )
  })
}
