// How the mock RAG backend answers: JSON in FastAPI's shape, every body marked as a mock,
// with the identity headers it received, so a test can see what the gateway told it.
import type { IncomingMessage, ServerResponse } from 'node:http'

/** The identity headers the gateway sets by default (config rag.identityHeaders). */
const IDENTITY_HEADERS = [
  'x-tollgate-user-id',
  'x-tollgate-user-name',
  'x-tollgate-user-roles',
  'x-tollgate-user-groups',
  'x-tollgate-tenant',
] as const

export interface MockExchange {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly service: string
  /** The route inside the service, without the query. */
  readonly path: string
  readonly query: URLSearchParams
}

/** Every x-tollgate-* header the mock received (the gateway's identity headers among them). */
export function receivedIdentity(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(req.headers)) {
    if (name.startsWith('x-tollgate-') && typeof value === 'string') out[name] = value
  }
  return out
}

/** The caller's user id as the gateway sent it, or 'anonymous' on a public route. */
export function callerId(req: IncomingMessage): string {
  const id = req.headers[IDENTITY_HEADERS[0]]
  return typeof id === 'string' ? decodeURIComponent(id) : 'anonymous'
}

/** The caller's groups as the gateway sent them (comma-separated, each percent-encoded). */
export function callerGroups(req: IncomingMessage): string[] {
  const groups = req.headers[IDENTITY_HEADERS[3]]
  if (typeof groups !== 'string' || groups === '') return []
  return groups.split(',').map((g) => decodeURIComponent(g))
}

/** Whose objects these are: tenant and user, so no caller ever reads another's files or tasks. */
export function callerOwner(req: IncomingMessage): string {
  const tenant = req.headers[IDENTITY_HEADERS[4]]
  return `${typeof tenant === 'string' ? decodeURIComponent(tenant) : ''}\u0000${callerId(req)}`
}

export function reply(x: MockExchange, status: number, body: Record<string, unknown>): void {
  send(x, status, { ...body, mock: true, service: x.service, identity: receivedIdentity(x.req) })
}

/**
 * A JSON list, as the provider's documented routes answer (uploads, file status, tasks,
 * user configurations). A list has no room for the mock's marks, so the header says it.
 */
export function replyList(x: MockExchange, status: number, items: readonly unknown[]): void {
  send(x, status, items)
}

function send(x: MockExchange, status: number, body: unknown): void {
  const payload = JSON.stringify(body)
  x.res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(payload),
    'x-mock-service': x.service,
  })
  x.res.end(payload)
}

export function detail(x: MockExchange, status: number, message: string): void {
  const payload = JSON.stringify({ detail: message })
  x.res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) })
  x.res.end(payload)
}

/** Reads a small JSON body (the mock's own requests); anything else, nesting too deep included, reads as {}. */
export async function readJson(req: IncomingMessage, limit = 1 << 20): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    size += (chunk as Buffer).length
    if (size > limit) break
    chunks.push(chunk as Buffer)
  }
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    return typeof value === 'object' && value !== null && !Array.isArray(value) && nestedWithin(value, MAX_DEPTH)
      ? (value as Record<string, unknown>)
      : {}
  } catch {
    return {}
  }
}

/** Deeper than any body the services take; a body nested deeper could not be echoed back (JSON.stringify recurses). */
const MAX_DEPTH = 64

/** Whether no object or array in `root` sits deeper than `limit` (a walk without recursion). */
function nestedWithin(root: object, limit: number): boolean {
  const stack: Array<[object, number]> = [[root, 1]]
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [value, depth] = item
    if (depth > limit) return false
    for (const child of Object.values(value)) {
      if (typeof child === 'object' && child !== null) stack.push([child as object, depth + 1])
    }
  }
  return true
}

/** A path segment decoded, or undefined when its percent-encoding is malformed (`%zz`). */
export function decodedSegment(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

/** A stable id from its parts (the mock's answers are deterministic). */
export function mockId(prefix: string, ...parts: readonly string[]): string {
  let h = 0x811c9dc5
  for (const ch of parts.join('\u0000')) {
    h ^= ch.codePointAt(0) ?? 0
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return `${prefix}_${h.toString(16).padStart(8, '0')}`
}
