// /files: upload (multipart), list, retrieve and delete. The mock keeps the metadata of
// each upload, not its bytes: nothing it serves reads file contents. One store per
// backend, global to it; the gateway filters lists by owner.
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { missingParameter, notFound, unknownUrl } from './errors.ts'
import { newId, unixSeconds } from './ids.ts'
import { paginate } from './page.ts'
import { formBody, optionalEnum, queryOf, quotableId, segmentsOf } from './params.ts'
import { jsonResponse } from './reply.ts'

/** The purposes an upload may name (CreateFileRequest). */
export const FILE_PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] as const

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
  handle(request: UpstreamRequest): UpstreamResponse
}

export function createFileStore(ctx: MockContext): FileStore {
  /** Insertion order is upload order; created_at alone has only second resolution. */
  const files = new Map<string, StoredFile>()

  const create = (request: UpstreamRequest): UpstreamResponse => {
    const form = formBody(request)
    const upload = form.files.find((f) => f.field === 'file')
    if (upload === undefined) throw missingParameter('file')
    const purpose = optionalEnum(form.fields, 'purpose', FILE_PURPOSES)
    if (purpose === undefined) throw missingParameter('purpose')
    const file: StoredFile = {
      id: newId('file-'),
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

  const existing = (id: string): StoredFile => {
    const file = files.get(id)
    if (file === undefined) throw notFound(`No such File object: ${quotableId(id)}`, 'id')
    return file
  }

  return {
    get: (id) => files.get(id),
    handle(request) {
      const { pathname, query } = queryOf(request.path)
      const segments = segmentsOf(pathname)
      if (segments === undefined || segments[0] !== 'files' || segments.length > 2) throw unknownUrl()
      const id = segments[1] ?? ''
      if (id === '') {
        if (request.method === 'POST') return create(request)
        if (request.method === 'GET') return list(query)
        throw unknownUrl()
      }
      if (request.method === 'GET') return jsonResponse(200, existing(id))
      if (request.method === 'DELETE') {
        existing(id)
        files.delete(id)
        return jsonResponse(200, { id, object: 'file', deleted: true })
      }
      throw unknownUrl()
    },
  }
}
