// What every admin route shares: reading an optional JSON body, and replies that no
// cache keeps. (Strict query strings are http/query.ts: the queue's routes read them too.)
import type { IncomingMessage } from 'node:http'
import { readJsonBody } from '../http/body.ts'
import type { BodyRate } from '../http/body-rate.ts'
import type { RequestContext } from '../http/context.ts'
import { sendJson } from '../http/reply.ts'

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
export async function readOptionalJson(
  req: IncomingMessage,
  limit: number,
  rate?: BodyRate,
): Promise<Record<string, unknown>> {
  if (!hasBody(req)) return {}
  return (await readJsonBody(req, limit, rate)).value
}
