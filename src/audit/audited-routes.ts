// The one seam through which every change made with the admin API, the CLI or the portal
// is recorded: a Router that registers routes on the real one, wrapping each route
// declared in declarations.ts, and refusing (at boot) a state-changing route under /admin
// or /portal that is not declared. Route modules do not call the audit log; they are
// audited by being registered here.
//
// A wrapped route: who is asking is settled first (the admin credential; the portal's
// session), the object is read as it was, the route runs, and if it succeeded the object is
// read again and the record appended. The reply waits for that record: a client that saw
// its change succeed can find it in the log at once.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { HTTPMethod } from 'find-my-way'
import type { AdminAuthenticator } from '../auth/admin.ts'
import { bearerToken } from '../auth/bearer.ts'
import { clientIp } from '../http/client-address.ts'
import type { RequestContext } from '../http/context.ts'
import type { Params, RouteHandler, Router } from '../http/router.ts'
import { AUDITED_ROUTES, NOT_CHANGES, type AuditedRoute, type NotAChange } from './declarations.ts'
import type { AuditLog } from './log.ts'
import { adminFingerprint, type AuditActor, type AuditChannel, type AuditSnapshot } from './record.ts'
import type { AuditSubject } from './subjects.ts'

/** The header the `tollgate` CLI sends, so its changes are told from other admin API clients'. */
export const CLIENT_HEADER = 'x-tollgate-client'

const CHANGES: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

export interface AuditSeamDeps {
  readonly audit: AuditLog
  readonly subjects: Readonly<Record<string, AuditSubject>>
  readonly authenticateAdmin: AdminAuthenticator
  /** The portal's signed-in user of this request, or null (the route then sends them to sign in). */
  readonly portalUser: (req: IncomingMessage) => Promise<{ readonly id: string; readonly name: string } | null>
  readonly trustProxyHops: number
  readonly routes?: readonly AuditedRoute[]
  readonly notChanges?: readonly NotAChange[]
}

type Door = 'admin' | 'portal'

function doorOf(path: string): Door | null {
  if (path.startsWith('/admin/') || path === '/admin') return 'admin'
  if (path.startsWith('/portal/') || path === '/portal') return 'portal'
  return null
}

/** Holds back res.end until release(): what the route replied, kept to read the created object's id. */
function holdReply(res: ServerResponse): { readonly body: () => unknown; release(): void } {
  const hadOwn = Object.hasOwn(res, 'end')
  const end = res.end
  let held: Parameters<ServerResponse['end']> | null = null
  res.end = ((...args: Parameters<ServerResponse['end']>) => {
    held = args
    return res
  }) as ServerResponse['end']
  return {
    body: () => held?.[0],
    release() {
      // Back to the prototype's end (or whatever was there), then the reply as it was written.
      if (hadOwn) res.end = end
      else delete (res as { end?: unknown }).end
      if (held !== null) (end as (...a: unknown[]) => unknown).apply(res, held)
    },
  }
}

function replyField(body: unknown, field: string): string | undefined {
  if (typeof body !== 'string' && !Buffer.isBuffer(body)) return undefined
  try {
    const parsed = JSON.parse(body.toString()) as unknown
    if (typeof parsed !== 'object' || parsed === null) return undefined
    const value = (parsed as Record<string, unknown>)[field]
    return typeof value === 'string' ? value : undefined
  } catch {
    return undefined
  }
}

function locationId(res: ServerResponse, pattern: RegExp): string | undefined {
  const location = res.getHeader('location')
  const found = typeof location === 'string' ? pattern.exec(location)?.[1] : undefined
  if (found === undefined) return undefined
  try {
    return decodeURIComponent(found)
  } catch {
    return undefined
  }
}

export function auditedRouter(router: Router, deps: AuditSeamDeps): Router {
  const routes = deps.routes ?? AUDITED_ROUTES
  const notChanges = deps.notChanges ?? NOT_CHANGES
  for (const route of routes) {
    if (deps.subjects[route.subject] === undefined)
      throw new Error(
        `audit: ${route.method} ${route.path} names subject ${route.subject}, which audit/subjects.ts lacks`,
      )
  }

  const actorOf = async (door: Door, req: IncomingMessage): Promise<[AuditActor, AuditChannel] | null> => {
    if (door === 'admin') {
      // The route would do the same first: a refusal here is the refusal it would answer.
      deps.authenticateAdmin(req)
      const client = req.headers[CLIENT_HEADER]
      return [{ type: 'admin', id: adminFingerprint(bearerToken(req) ?? '') }, client === 'cli' ? 'cli' : 'api']
    }
    const user = await deps.portalUser(req)
    return user === null ? null : [{ type: 'user', id: user.id, name: user.name }, 'portal']
  }

  const wrap = (door: Door, route: AuditedRoute, handler: RouteHandler): RouteHandler => {
    const subject = deps.subjects[route.subject] as AuditSubject
    return async (ctx: RequestContext, params: Params, query: URLSearchParams) => {
      const who = await actorOf(door, ctx.req)
      if (who === null) return handler(ctx, params, query)
      const paramId =
        'param' in route.id
          ? params[route.id.param]
          : 'params' in route.id
            ? route.id.params.map((name) => params[name] ?? '').join('/')
            : 'fixed' in route.id
              ? route.id.fixed
              : undefined
      const before = paramId === undefined ? null : await subject.load(paramId)
      const reply = holdReply(ctx.res)
      try {
        await handler(ctx, params, query)
        if (ctx.res.statusCode < 400 && ctx.errorName === undefined)
          await record(ctx, route, subject, who, paramId, before, reply.body())
      } finally {
        reply.release()
      }
    }
  }

  const record = async (
    ctx: RequestContext,
    route: AuditedRoute,
    subject: AuditSubject,
    [actor, via]: [AuditActor, AuditChannel],
    paramId: string | undefined,
    before: AuditSnapshot | null,
    body: unknown,
  ): Promise<void> => {
    const source = route.id
    const objectId =
      paramId ??
      ('reply' in source ? replyField(body, source.reply) : undefined) ??
      ('location' in source ? locationId(ctx.res, source.location) : undefined)
    try {
      if (objectId === undefined) throw new Error('the changed object has no id where its declaration says')
      const after = await subject.load(objectId)
      await deps.audit.record({
        actor,
        via,
        action: route.action,
        objectType: subject.type,
        objectId,
        before,
        after,
        address: clientIp(ctx.req, deps.trustProxyHops),
        requestId: ctx.id,
      })
    } catch (err) {
      // The change is made and answered; what went missing is said loudly, without its contents.
      ctx.log.error(
        { err: (err as Error).message, audit: route.action, objectType: subject.type, objectId },
        'audit: a change could not be recorded',
      )
    }
  }

  const find = (method: string, path: string): AuditedRoute | undefined =>
    routes.find((r) => r.method === method && r.path === path)

  return {
    on(method: HTTPMethod | HTTPMethod[], path: string, handler: RouteHandler) {
      const door = doorOf(path)
      for (const m of Array.isArray(method) ? method : [method]) {
        const declared = find(m, path)
        if (door === null || !CHANGES.has(m)) {
          router.on(m, path, handler)
        } else if (declared !== undefined) {
          router.on(m, path, wrap(door, declared, handler))
        } else if (notChanges.some((n) => n.method === m && n.path === path)) {
          router.on(m, path, handler)
        } else {
          throw new Error(
            `${m} ${path} changes state but is not declared in src/audit/declarations.ts (AUDITED_ROUTES, or NOT_CHANGES with a reason)`,
          )
        }
      }
    },
  }
}
