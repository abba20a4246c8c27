// Reading request bodies: content-type checks, size limits enforced before and while
// reading, JSON parsing, and multipart uploads spooled to disk so that a large audio
// file never sits whole in memory and can be replayed to a second upstream.
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, rm, stat } from 'node:fs/promises'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { once } from 'node:events'
import { setImmediate as nextTurn } from 'node:timers/promises'
import busboy from 'busboy'
import { gatewayError } from '../errors.ts'
import { readBodyChunks, type BodyRate } from './body-rate.ts'
import { spoolFileName } from './spool.ts'
import { isJsonType, mediaType } from './media-type.ts'

export interface JsonBody {
  readonly kind: 'json'
  readonly value: Record<string, unknown>
  /**
   * What the client sent, when this body was read from a request: its bytes, and the
   * members (at every depth) that parsing them gave (http/json-bytes.ts compares the two
   * before the bytes may go upstream as they are). `value` is never changed in place.
   */
  readonly received?: { readonly bytes: Buffer; readonly members: number }
  /** The exact bytes to send upstream for this body; without them `value` is serialised. */
  readonly wire?: Buffer
}

export interface UploadedFile {
  readonly field: string
  readonly filename: string
  readonly mimeType: string
  readonly size: number
}

export interface MultipartBody {
  readonly kind: 'multipart'
  /** The text fields of the form (small values only). */
  readonly fields: Readonly<Record<string, string>>
  /** Text fields given more than once (`fields` holds the last value). */
  readonly repeatedFields?: readonly string[]
  readonly files: readonly UploadedFile[]
  /** The original Content-Type, boundary included: the spooled bytes are sent as they came. */
  readonly contentType: string
  readonly size: number
  /** A fresh stream of the exact bytes the client sent. */
  open(): Readable
  /** Deletes the spool file; safe to call twice. */
  dispose(): Promise<void>
}

export interface NoBody {
  readonly kind: 'none'
}

export type RequestBody = JsonBody | MultipartBody | NoBody

/** "application/json; charset=utf-8" → "application/json". */
export function mediaTypeOf(req: IncomingMessage): string {
  return mediaType(req.headers['content-type'])
}

function declaredLength(req: IncomingMessage): number | undefined {
  const header = req.headers['content-length']
  if (header === undefined) return undefined
  if (!/^\d+$/.test(header)) throw gatewayError('bad_header', { message: 'Content-Length must be a whole number.' })
  return Number(header)
}

function tooLarge(limit: number): Error {
  return gatewayError('body_too_large', { message: `The request body is larger than the limit of ${limit} bytes.` })
}

/** Refuses at once when Content-Length already says the body is too large. */
function checkDeclaredLength(req: IncomingMessage, limit: number): void {
  const length = declaredLength(req)
  if (length !== undefined && length > limit) throw tooLarge(limit)
}

/** A JSON body larger than this is parsed in a turn of the event loop of its own. */
const YIELD_AFTER_BYTES = 256 * 1024

/** `rate`: the pace the body must keep (see body-rate.ts); none for trusted callers. */
export async function readJsonBody(req: IncomingMessage, limit: number, rate?: BodyRate): Promise<JsonBody> {
  const type = mediaTypeOf(req)
  if (!isJsonType(type)) {
    throw gatewayError('unsupported_media_type', {
      message: `Expected Content-Type application/json${type ? `, got ${describeType(type)}` : ''}.`,
    })
  }
  checkDeclaredLength(req, limit)
  const chunks: Buffer[] = []
  let size = 0
  await readBodyChunks(req, rate, (chunk) => {
    size += chunk.length
    if (size > limit) throw tooLarge(limit)
    chunks.push(chunk)
  })
  const bytes = Buffer.concat(chunks, size)
  let value: unknown
  try {
    value = JSON.parse(bytes.toString('utf8'))
  } catch {
    throw gatewayError('invalid_json')
  }
  // Parsing megabytes takes milliseconds, and so does what comes next (the estimate, the
  // backend's own work): each gets its own turn of the event loop, so that no single turn
  // holds every other client up for their sum.
  if (size > YIELD_AFTER_BYTES) await nextTurn()
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw gatewayError('invalid_body', { message: 'The request body must be a JSON object.' })
  }
  const members = checkJsonValue(value)
  return { kind: 'json', value: value as Record<string, unknown>, received: { bytes, members } }
}

/** Deeper than any real request (tool schemas included), far shallower than what breaks a recursive serializer. */
export const MAX_JSON_DEPTH = 128

/**
 * What JSON.parse accepts but the gateway cannot pass on faithfully: nesting so deep that
 * serializing it again overflows the stack, and numbers beyond a double (1e400 parses
 * as Infinity, which would be sent on as null). One pass, without recursion, which also
 * counts the objects' members (JsonBody.received).
 */
function checkJsonValue(root: object): number {
  let members = 0
  const stack: Array<[unknown, number]> = [[root, 1]]
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [value, depth] = item
    if (typeof value === 'number') {
      if (!Number.isFinite(value))
        throw gatewayError('invalid_body', { message: 'A number in the request body is out of range.' })
      continue
    }
    if (typeof value !== 'object' || value === null) continue
    if (depth > MAX_JSON_DEPTH)
      throw gatewayError('invalid_body', {
        message: `The request body is nested more than ${MAX_JSON_DEPTH} levels deep.`,
      })
    const children = Object.values(value)
    if (!Array.isArray(value)) members += children.length
    for (const child of children) {
      if (typeof child === 'object' || typeof child === 'number') stack.push([child, depth + 1])
    }
  }
  return members
}

const MAX_FIELD_BYTES = 64 * 1024
const MAX_FIELDS = 200
const MAX_PARTS = 1000

/**
 * Spools a multipart/form-data body to `spoolDir` while reading its text fields, so the
 * gateway knows the model before it picks an upstream. The file parts are counted, not kept.
 */
export async function readMultipartBody(
  req: IncomingMessage,
  limit: number,
  spoolDir: string,
  rate?: BodyRate,
): Promise<MultipartBody> {
  const contentType = req.headers['content-type'] ?? ''
  if (mediaTypeOf(req) !== 'multipart/form-data' || !/boundary=/i.test(contentType)) {
    throw gatewayError('unsupported_media_type', {
      message: 'Expected Content-Type multipart/form-data with a boundary.',
    })
  }
  checkDeclaredLength(req, limit)
  // Uploads are the callers' data: the owner's only, as the rest of the data directory.
  await mkdir(spoolDir, { recursive: true, mode: 0o700 })
  const path = join(spoolDir, spoolFileName())
  const dispose = (): Promise<void> => rm(path, { force: true })

  // No prototype: a field named __proto__ is just a field.
  const fields: Record<string, string> = Object.create(null) as Record<string, string>
  const repeated = new Set<string>()
  const files: UploadedFile[] = []
  let parser: busboy.Busboy
  try {
    parser = busboy({
      headers: req.headers,
      limits: { fieldSize: MAX_FIELD_BYTES, fields: MAX_FIELDS, parts: MAX_PARTS },
    })
  } catch {
    throw gatewayError('invalid_multipart')
  }
  let parseError: Error | undefined
  const parsed = new Promise<void>((resolve, reject) => {
    const fail = (error: Error): void => {
      parseError ??= error
      reject(error)
    }
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) {
        fail(gatewayError('invalid_multipart', { message: `Form field "${safeName(name)}" is too long.` }))
        return
      }
      if (Object.hasOwn(fields, name)) repeated.add(name)
      fields[name] = value
    })
    parser.on('file', (field, stream, info) => {
      let size = 0
      // A form cut off inside a file part errors this stream as well as the parser; the
      // parser's error is the one reported, and an unheard one would end the process.
      stream.on('error', () => undefined)
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length
      })
      stream.on('end', () => files.push({ field, filename: info.filename ?? '', mimeType: info.mimeType, size }))
    })
    // Past a limit busboy skips the rest silently; the upstream would still get all of it.
    const tooMany = (): void =>
      fail(
        gatewayError('invalid_multipart', {
          message: `The form has more than ${MAX_PARTS} parts or ${MAX_FIELDS} text fields.`,
        }),
      )
    parser.on('partsLimit', tooMany)
    parser.on('fieldsLimit', tooMany)
    parser.on('close', resolve)
    parser.on('error', () => fail(gatewayError('invalid_multipart')))
  })
  // Awaited below; this keeps an early rejection from counting as unhandled meanwhile.
  parsed.catch(() => undefined)

  let size = 0
  const spool = createWriteStream(path, { mode: 0o600 })
  const spooled = new Promise<void>((resolve, reject) => {
    spool.once('close', resolve)
    spool.once('error', reject)
  })
  spooled.catch(() => undefined)
  try {
    await readBodyChunks(req, rate, (chunk) => {
      size += chunk.length
      if (size > limit) throw tooLarge(limit)
      // A form that cannot be parsed is refused now, not once all of it is on disk.
      if (parseError !== undefined) throw parseError
      parser.write(chunk)
      // The disk is behind: hold the body back until it catches up.
      if (!spool.write(chunk)) return Promise.race([once(spool, 'drain').then(() => undefined), spooled])
    })
    parser.end()
    spool.end()
    await spooled
    await parsed
  } catch (err) {
    spool.destroy()
    parser.destroy()
    await dispose()
    throw err instanceof Error && 'status' in err ? err : gatewayError('invalid_multipart')
  }
  return {
    kind: 'multipart',
    fields,
    ...(repeated.size > 0 ? { repeatedFields: [...repeated] } : {}),
    files,
    contentType,
    size: (await stat(path)).size,
    open: () => createReadStream(path),
    dispose,
  }
}

/** Reflect nothing the client sent beyond a short, plain rendering. */
function describeType(type: string): string {
  return /^[a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,64}$/.test(type) ? type : 'an unsupported type'
}

function safeName(name: string): string {
  return /^[A-Za-z0-9_.[\]-]{1,64}$/.test(name) ? name : '(field)'
}

/** Requests already being discarded: a refusal starts it, the end of the reply checks again. */
const discarding = new WeakSet<IncomingMessage>()

/** Bodies declared larger than this are not drained after a refusal: the connection is cut. */
const MAX_DRAIN_BYTES = 64 * 1024 * 1024
/** How long a refused body may keep arriving before the connection is cut. */
const DRAIN_MS = 5_000

/**
 * After a refusal sent before the body was read (413, 415, 401...), reads and discards
 * what the client is still sending, so that it gets to read the answer instead of a
 * connection reset (a "lingering close"). Bounded in bytes and time; an absurd declared
 * length just closes the connection after the answer.
 */
export function discardUnreadBody(req: IncomingMessage, res: ServerResponse): void {
  if (req.complete || req.destroyed || discarding.has(req)) return
  discarding.add(req)
  let declared: number | undefined
  try {
    declared = declaredLength(req)
  } catch {
    declared = Infinity
  }
  if ((declared ?? 0) > MAX_DRAIN_BYTES && !res.headersSent) {
    res.setHeader('connection', 'close')
    return
  }
  let seen = 0
  const cut = (): void => {
    req.destroy()
  }
  const timer = setTimeout(cut, DRAIN_MS)
  timer.unref()
  req.on('data', (chunk: Buffer) => {
    seen += chunk.length
    if (seen > MAX_DRAIN_BYTES) cut()
  })
  req.once('end', () => clearTimeout(timer))
  req.once('close', () => clearTimeout(timer))
  req.resume()
}
