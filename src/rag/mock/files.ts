// file-manager: multipart uploads, read as they stream (hashed and counted, never held),
// each file answered with a status; and ingest-master, which ingests them.
import { createHash } from 'node:crypto'
import { extname } from 'node:path'
import busboy from 'busboy'
import { mockId, readJson, reply, detail, type MockExchange } from './reply.ts'

/** What the mock accepts; anything else is file_type_not_supported. */
const SUPPORTED = new Set(['.pdf', '.txt', '.md', '.docx', '.html', '.csv', '.json', '.bin'])

export interface FileLimits {
  /** A file larger than this is file_too_large (the rest of it is read and dropped). */
  readonly maxFileBytes: number
}

interface UploadResult {
  filename: string
  status: 'uploaded' | 'duplicated' | 'error' | 'file_too_large' | 'file_type_not_supported'
  size: number
  sha256: string | null
  file_id: string | null
}

export function createFileService(limits: FileLimits): (x: MockExchange) => Promise<boolean> {
  const known = new Map<string, string>() // sha256 → file id
  return async (x) => {
    if (/^\/api\/v1\/files\/?$/.test(x.path) && x.req.method === 'GET') {
      reply(x, 200, { files: [...known.values()].map((id) => ({ file_id: id })) })
      return true
    }
    if (!/^\/api\/v1\/files(\/upload)?\/?$/.test(x.path) || x.req.method !== 'POST') return false
    if (!(x.req.headers['content-type'] ?? '').startsWith('multipart/form-data')) {
      detail(x, 422, 'expected a multipart/form-data upload (mock)')
      return true
    }
    const results = await receive(x)
    if (results === null) return true
    for (const r of results) {
      if (r.status !== 'uploaded' || r.sha256 === null) continue
      const seen = known.get(r.sha256)
      if (seen !== undefined) Object.assign(r, { status: 'duplicated', file_id: seen })
      else known.set(r.sha256, r.file_id ?? '')
    }
    reply(x, 200, { files: results, received_bytes: results.reduce((n, r) => n + r.size, 0) })
    return true
  }

  function receive(x: MockExchange): Promise<UploadResult[] | null> {
    return new Promise((done) => {
      const results: UploadResult[] = []
      let parser: busboy.Busboy
      try {
        parser = busboy({ headers: x.req.headers })
      } catch {
        detail(x, 422, 'the multipart body could not be read (mock)')
        done(null)
        return
      }
      parser.on('file', (_field, stream, info) => {
        const filename = info.filename || 'unnamed'
        const hash = createHash('sha256')
        let size = 0
        // A form cut off mid-file fails the file's stream as well as the parser; the
        // parser's error answers it (an unheard stream error would end the process).
        stream.on('error', () => undefined)
        stream.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size <= limits.maxFileBytes) hash.update(chunk)
        })
        stream.on('end', () => {
          const status: UploadResult['status'] = filename.includes('error') ? 'error'
            : !SUPPORTED.has(extname(filename).toLowerCase()) ? 'file_type_not_supported'
              : size > limits.maxFileBytes ? 'file_too_large' : 'uploaded'
          const sha256 = status === 'uploaded' ? hash.digest('hex') : null
          results.push({ filename, status, size, sha256, file_id: sha256 === null ? null : mockId('file', sha256) })
        })
      })
      parser.once('close', () => done(results))
      parser.on('error', () => {
        if (x.res.headersSent) return
        x.req.unpipe(parser)
        x.req.resume()
        detail(x, 422, 'the multipart body could not be read (mock)')
        done(null)
      })
      x.req.pipe(parser)
    })
  }
}

/** ingest-master: POST /api/v1/ingest {file_ids}; a file id containing "fail" fails. */
export function createIngestService(): (x: MockExchange) => Promise<boolean> {
  return async (x) => {
    if (!/^\/api\/v1\/ingest(ions?)?\/?$/.test(x.path) || x.req.method !== 'POST') return false
    const body = await readJson(x.req)
    const ids = Array.isArray(body.file_ids) ? body.file_ids.filter((id): id is string => typeof id === 'string') : []
    if (ids.length === 0) {
      detail(x, 422, 'file_ids must list at least one file id (mock)')
      return true
    }
    reply(x, 202, {
      job_id: mockId('ingest', ...ids),
      results: ids.map((id) => ({ file_id: id, status: id.includes('fail') ? 'ingestion_failed' : 'ingested' })),
    })
    return true
  }
}
