// Reading request bodies: content-type checks, size limits enforced before and while
// reading, JSON parsing, and multipart uploads spooled to disk so that a large audio
// file never sits whole in memory and can be replayed to a second upstream.
import { createReadStream, createWriteStream } from 'node:fs'
import { mkdir, rm, stat } from 'node:fs/promises'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { Transform } from 'node:stream'
import busboy from 'busboy'
import { gatewayError } from '../errors.ts'

export interface JsonBody {
  readonly kind: 'json'
  readonly value: Record<string, unknown>
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
  const header = req.headers['content-type'] ?? ''
  return (header.split(';', 1)[0] ?? '').trim().toLowerCase()
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

export async function readJsonBody(req: IncomingMessage, limit: number): Promise<JsonBody> {
  const type = mediaTypeOf(req)
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw gatewayError('unsupported_media_type', {
      message: `Expected Content-Type application/json${type ? `, got ${describeType(type)}` : ''}.`,
    })
  }
  checkDeclaredLength(req, limit)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) throw tooLarge(limit)
    chunks.push(chunk)
  }
  let value: unknown
  try {
    value = JSON.parse(Buffer.concat(chunks, size).toString('utf8'))
  } catch {
    throw gatewayError('invalid_json')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw gatewayError('invalid_body', { message: 'The request body must be a JSON object.' })
  }
  return { kind: 'json', value: value as Record<string, unknown> }
}

const MAX_FIELD_BYTES = 64 * 1024

/**
 * Spools a multipart/form-data body to `spoolDir` while reading its text fields, so the
 * gateway knows the model before it picks an upstream. The file parts are counted, not kept.
 */
export async function readMultipartBody(req: IncomingMessage, limit: number, spoolDir: string): Promise<MultipartBody> {
  const contentType = req.headers['content-type'] ?? ''
  if (mediaTypeOf(req) !== 'multipart/form-data' || !/boundary=/i.test(contentType)) {
    throw gatewayError('unsupported_media_type', {
      message: 'Expected Content-Type multipart/form-data with a boundary.',
    })
  }
  checkDeclaredLength(req, limit)
  await mkdir(spoolDir, { recursive: true })
  const path = join(spoolDir, `upload-${randomUUID()}`)
  const dispose = (): Promise<void> => rm(path, { force: true })

  const fields: Record<string, string> = {}
  const files: UploadedFile[] = []
  let parser: busboy.Busboy
  try {
    parser = busboy({ headers: req.headers, limits: { fieldSize: MAX_FIELD_BYTES, fields: 200, parts: 1000 } })
  } catch {
    throw gatewayError('invalid_multipart')
  }
  const parsed = new Promise<void>((resolve, reject) => {
    parser.on('field', (name, value, info) => {
      if (info.valueTruncated) reject(gatewayError('invalid_multipart', { message: `Form field "${safeName(name)}" is too long.` }))
      else fields[name] = value
    })
    parser.on('file', (field, stream, info) => {
      let size = 0
      stream.on('data', (chunk: Buffer) => { size += chunk.length })
      stream.on('end', () => files.push({ field, filename: info.filename ?? '', mimeType: info.mimeType, size }))
    })
    parser.on('close', resolve)
    parser.on('error', () => reject(gatewayError('invalid_multipart')))
  })
  // Awaited below; this keeps an early rejection from counting as unhandled meanwhile.
  parsed.catch(() => undefined)

  let size = 0
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      size += chunk.length
      if (size > limit) done(tooLarge(limit))
      else {
        parser.write(chunk)
        done(null, chunk)
      }
    },
    flush(done) {
      parser.end()
      done()
    },
  })
  try {
    await pipeline(req, counter, createWriteStream(path))
    await parsed
  } catch (err) {
    await dispose()
    throw err instanceof Error && 'status' in err ? err : gatewayError('invalid_multipart')
  }
  const spooled = (await stat(path)).size
  return {
    kind: 'multipart',
    fields,
    files,
    contentType,
    size: spooled,
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
  if (req.complete || req.destroyed) return
  let declared: number | undefined
  try {
    declared = declaredLength(req)
  } catch {
    declared = Infinity
  }
  if ((declared ?? 0) > MAX_DRAIN_BYTES) {
    if (!res.headersSent) res.setHeader('connection', 'close')
    return
  }
  let seen = 0
  const cut = (): void => { req.socket.destroy() }
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
