import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

// A client's id is kept only when it is short and plain, so that it cannot inject
// anything into logs or headers.
const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/

export function requestIdOf(req: IncomingMessage, trustClient: boolean): string {
  const given = req.headers['x-request-id']
  if (trustClient && typeof given === 'string' && SAFE_ID.test(given)) return given
  return `req_${randomUUID().replaceAll('-', '')}`
}
