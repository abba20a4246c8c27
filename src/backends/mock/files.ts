// /files: upload (multipart), list, retrieve, content, validate (file-validation.ts) and delete. The mock keeps each
// upload's metadata in memory and its bytes in a file of its own under ctx.filesDir (an
// upload may be 100 MB), streamed back by /content. One store per backend, global to it;
// the gateway filters lists by owner.
import { createReadStream, createWriteStream } from 'node:fs'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { pipeline } from 'node:stream/promises'
import busboy from 'busboy'
import { FILE_PURPOSES } from '../../api/files.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { validateDataset } from './file-validation.ts'
import { missingParameter, unknownUrl } from './errors.ts'
import { newId, unixSeconds } from './ids.ts'
import { paginate } from './page.ts'
import { formBody, objectById, optionalEnum, queryOf, segmentsOf } from './params.ts'
import { jsonResponse } from './reply.ts'

export interface StoredFile {
  readonly id: string
  readonly object: 'file'
  readonly bytes: number
  readonly created_at: number
  readonly expires_at: null
  readonly filename: string
  readonly purpose: string
  readonly status: 'processed'
  readonly status_details: null
}

export interface FileStore {
  get(id: string): StoredFile | undefined
  /** Where a file's bytes are. */
  pathOf(id: string): string
  /** Called with the id of each file deleted (vector stores drop it). */
  onDeleted(listener: (id: string) => void): void
  handle(request: UpstreamRequest): Promise<UpstreamResponse>
}

/** Copies the part named `field` of a multipart body to `path`; resolves with its size. */
async function saveFilePart(request: UpstreamRequest, field: string, path: string): Promise<number> {
  const form = formBody(request)
  const parser = busboy({ headers: { 'content-type': form.contentType } })
  let saved: Promise<number> | undefined
  parser.on('file', (name, stream) => {
    if (name !== field || saved !== undefined) {
      // Dropped; a form cut off inside it fails the parse (pipeline below), not the process.
      stream.on('error', () => undefined)
      stream.resume()
      return
    }
    let size = 0
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length
    })
    saved = pipeline(stream, createWriteStream(path, { mode: 0o600 })).then(() => size)
  })
  await pipeline(form.open(), parser)
  if (saved === undefined) throw missingParameter(field)
  return saved
}

export function createFileStore(ctx: MockContext): FileStore {
  /** Insertion order is upload order; created_at alone has only second resolution. */
  const files = new Map<string, StoredFile>()
  const deletedListeners: Array<(id: string) => void> = []

  const pathOf = (id: string): string => join(ctx.filesDir, id)

  const create = async (request: UpstreamRequest): Promise<UpstreamResponse> => {
    const form = formBody(request)
    const upload = form.files.find((f) => f.field === 'file')
    if (upload === undefined) throw missingParameter('file')
    const purpose = optionalEnum(form.fields, 'purpose', FILE_PURPOSES)
    if (purpose === undefined) throw missingParameter('purpose')
    const id = newId('file-')
    await saveFilePart(request, 'file', pathOf(id))
    const file: StoredFile = {
      id,
      object: 'file',
      bytes: upload.size,
      created_at: unixSeconds(ctx.now()),
      expires_at: null,
      filename: upload.filename,
      purpose,
      status: 'processed',
      status_details: null,
    }
    files.set(file.id, file)
    return jsonResponse(200, file)
  }

  const list = (query: Readonly<Record<string, unknown>>): UpstreamResponse => {
    const purpose = optionalEnum(query, 'purpose', FILE_PURPOSES)
    const order = optionalEnum(query, 'order', ['asc', 'desc'] as const) ?? 'desc'
    let all = [...files.values()].filter((f) => purpose === undefined || f.purpose === purpose)
    if (order === 'desc') all = all.reverse()
    const page = paginate(all, query, { default: 10_000, max: 10_000 })
    return jsonResponse(200, { ...page, first_id: page.data[0]?.id ?? null, last_id: page.data.at(-1)?.id ?? null })
  }

  const existing = (id: string): StoredFile => objectById(files, id, 'File object', 'id')

  /** The bytes as they were uploaded, streamed from disk. */
  const content = (id: string): UpstreamResponse => {
    const file = existing(id)
    return {
      status: 200,
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(file.bytes) },
      body: createReadStream(pathOf(id)),
    }
  }

  return {
    get: (id) => files.get(id),
    pathOf,
    onDeleted: (listener) => {
      deletedListeners.push(listener)
    },
    async handle(request) {
      const { pathname, query } = queryOf(request.path)
      const segments = segmentsOf(pathname)
      if (segments === undefined || segments[0] !== 'files' || segments.length > 3) throw unknownUrl()
      const id = segments[1] ?? ''
      if (segments.length === 3 && id === 'validate' && request.method === 'GET') {
        const file = existing(segments[2] ?? '')
        return jsonResponse(200, await validateDataset(pathOf(file.id), file))
      }
      if (segments.length === 3) {
        if (segments[2] === 'content' && request.method === 'GET') return content(id)
        throw unknownUrl()
      }
      if (id === '') {
        if (request.method === 'POST') return create(request)
        if (request.method === 'GET') return list(query)
        throw unknownUrl()
      }
      if (request.method === 'GET') return jsonResponse(200, existing(id))
      if (request.method === 'DELETE') {
        existing(id)
        files.delete(id)
        for (const listener of deletedListeners) listener(id)
        await rm(pathOf(id), { force: true })
        return jsonResponse(200, { id, object: 'file', deleted: true })
      }
      throw unknownUrl()
    },
  }
}
