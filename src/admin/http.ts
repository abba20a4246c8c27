// What every admin route shares: the handler shape, reading an optional JSON body,
// strict query strings, and replies that no cache keeps.
import type { IncomingMessage } from 'node:http'
import type { z } from 'zod'
import { gatewayError } from '../errors.ts'
import { readJsonBody } from '../http/body.ts'
import type { BodyRate } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import { sendJson } from '../http/reply.ts'
import type { Params } from '../http/router.ts'

export type AdminHandler = (ctx: RequestContext, params: Params, query: URLSearchParams) => Promise<void>

/** The router app.ts builds; admin routes are added to it. */
export interface AdminRouter {
  on(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, route: AdminHandler): unknown
}

/** Admin replies may carry a secret (create, rotate) and always describe live state. */
export function sendAdmin(ctx: RequestContext, status: number, body: unknown): void {
  sendJson(ctx.res, status, body, { 'cache-control': 'no-store' })
}

function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length']
  if (length !== undefined) return length.trim() !== '0'
  return req.headers['transfer-encoding'] !== undefined
}

/** A JSON body where one is optional (rotate): none at all reads as {}. */
export async function readOptionalJson(req: IncomingMessage, limit: number, rate?: BodyRate): Promise<Record<string, unknown>> {
  if (!hasBody(req)) return {}
  return (await readJsonBody(req, limit, rate)).value
}

/**
 * Query parameters against a strict schema. An unknown or repeated parameter is a 400:
 * a typo like `?ownr=x` must not quietly list every key.
 */
export function parseQuery<S extends z.ZodType>(schema: S, query: URLSearchParams): z.infer<S> {
  const values: Record<string, string> = {}
  for (const [name, value] of query) {
    if (Object.hasOwn(values, name)) throw gatewayError('invalid_body', { message: `Query parameter ${printable(name)} is given more than once.`, param: printable(name) })
    values[name] = value
  }
  const parsed = schema.safeParse(values)
  if (parsed.success) return parsed.data
  const issue = parsed.error.issues[0]
  if (issue?.code === 'unrecognized_keys') {
    throw gatewayError('invalid_body', { message: `Unknown query parameter(s): ${issue.keys.map(printable).join(', ')}.` })
  }
  const param = issue?.path.map(String).join('.') || null
  throw gatewayError('invalid_body', { message: `Invalid query parameter ${param ?? ''}: ${issue?.message ?? 'invalid value'}.`, param })
}

/** Client-supplied names are echoed only when plain. */
export function printable(value: string): string {
  return /^[\w.-]{1,64}$/.test(value) ? value : '(unprintable)'
}
