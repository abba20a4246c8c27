// file-manager: multipart uploads, read as they stream (hashed and counted, never held),
// each file answered as the provider's Local KB Guide reads it: {fileId, userId, fileName,
// fileUri, status}. A stored file is "pending" for one status step, then "uploaded" (or
// "duplicated": its owner already has it in that knowledge base); a refused one is final at
// once ("error", "file_too_large", "file_type_not_supported"). GET lists the caller's files,
// filtered by `fileIds` repeated in the query, as Python requests sends a list.
import { createHash } from 'node:crypto'
import { extname } from 'node:path'
import busboy from 'busboy'
import { keepNewest } from './bounded.ts'
import { formBody, type FormBody } from './form-body.ts'
import { stageAt, type Pace } from './progress.ts'
import { callerId, callerOwner, mockId, replyList, detail, type MockExchange } from './reply.ts'

/** What the mock accepts; anything else is file_type_not_supported. */
const SUPPORTED = new Set(['.pdf', '.txt', '.md', '.docx', '.html', '.csv', '.json', '.bin'])

/** The knowledge bases a file can go to: the caller's own, or the shared one. */
const KNOWLEDGE_BASES = new Set(['local', 'global'])

/** The multipart field of the files (the Local KB Guide's `files=[("files", ...)]`). */
const FIELD = 'files'

/** Files remembered by the mock in all (the oldest are forgotten past this). */
const MAX_FILES = 10_000

export type UploadStatus =
  'pending' | 'uploaded' | 'duplicated' | 'error' | 'file_too_large' | 'file_type_not_supported'
type Outcome = Exclude<UploadStatus, 'pending'>

export interface FileLimits {
  /** A file larger than this is file_too_large (the rest of it is read and dropped). */
  readonly maxFileBytes: number
}

interface StoredFile {
  readonly fileId: string
  readonly userId: string
  readonly fileName: string
  /** Where the content lives (the original's place for a duplicate); null when not stored. */
  readonly fileUri: string | null
  readonly kb: string
  readonly owner: string
  readonly size: number
  readonly sha256: string | null
  readonly outcome: Outcome
  readonly since: number
}

interface Received {
  readonly fileName: string
  readonly size: number
  readonly sha256: string | null
  readonly outcome: Outcome
}

export function createFileService(limits: FileLimits, pace: Pace): (x: MockExchange) => Promise<boolean> {
  const files = new Map<string, StoredFile>() // fileId → file
  const stored = new Map<string, StoredFile>() // owner, kb, sha256 → the first stored copy
  let sequence = 0

  const view = (f: StoredFile): Record<string, unknown> => ({
    fileId: f.fileId,
    userId: f.userId,
    fileName: f.fileName,
    fileUri: f.fileUri,
    status:
      f.outcome === 'uploaded' || f.outcome === 'duplicated'
        ? stageAt(pace, f.since, ['pending', f.outcome])
        : f.outcome,
    kb: f.kb,
    size: f.size,
  })

  return async (x) => {
    const listRoute = /^\/api\/v1\/files\/?$/.test(x.path)
    // /upload: the mock's earlier spelling of the upload, kept for the clients that use it.
    if (!listRoute && !/^\/api\/v1\/files\/upload\/?$/.test(x.path)) return false
    const kb = x.query.get('kb') ?? 'local'
    if (!KNOWLEDGE_BASES.has(kb)) {
      detail(x, 422, 'kb must be "local" or "global" (mock)')
      return true
    }
    const owner = callerOwner(x.req)
    if (listRoute && x.req.method === 'GET') {
      const wanted = x.query.getAll('fileIds')
      const mine =
        wanted.length > 0
          ? wanted.flatMap((id) => {
              const f = files.get(id)
              return f === undefined ? [] : [f]
            })
          : [...files.values()]
      replyList(x, 200, mine.filter((f) => f.owner === owner && f.kb === kb).map(view))
      return true
    }
    if (x.req.method !== 'POST') return false
    const form = await formBody(x.req)
    if (form === null) {
      detail(x, 422, 'expected a multipart/form-data upload (mock)')
      return true
    }
    const received = await receive(x, form)
    if (received === null) return true
    const now = pace.now()
    const answer = received.map((r) => {
      const fileId = mockId('file', owner, kb, String(sequence++))
      const key = r.sha256 === null ? null : `${owner}\u0000${kb}\u0000${r.sha256}`
      const first = key === null ? undefined : stored.get(key)
      const outcome: Outcome = first !== undefined ? 'duplicated' : r.outcome
      const fileUri =
        r.outcome !== 'uploaded'
          ? null
          : (first?.fileUri ?? `mock://file-manager/${kb}/${fileId}/${encodeURIComponent(r.fileName)}`)
      const file: StoredFile = {
        fileId,
        userId: callerId(x.req),
        fileName: r.fileName,
        fileUri,
        kb,
        owner,
        size: r.size,
        sha256: r.sha256,
        outcome,
        since: now,
      }
      files.set(fileId, file)
      if (key !== null && first === undefined) stored.set(key, file)
      return view(file)
    })
    keepNewest(files, MAX_FILES)
    keepNewest(stored, MAX_FILES)
    replyList(x, 200, answer)
    return true
  }

  function receive(x: MockExchange, form: FormBody): Promise<Received[] | null> {
    return new Promise((done) => {
      const results: Received[] = []
      let parser: busboy.Busboy
      try {
        parser = busboy({ headers: form.headers })
      } catch {
        detail(x, 422, 'the multipart body could not be read (mock)')
        done(null)
        return
      }
      let named = false
      parser.on('file', (field, stream, info) => {
        // A form cut off mid-file fails the file's stream as well as the parser, whatever the
        // part's field; the parser's error answers it (an unheard stream error would end the
        // process: the fuzz once cut a form inside a part it had dropped).
        stream.on('error', () => undefined)
        // The documented field is `files` (repeated, one part per file); a part under any
        // other name is read and dropped, as FastAPI ignores fields it does not declare.
        if (field !== FIELD) {
          stream.resume()
          return
        }
        named = true
        const fileName = info.filename || 'unnamed'
        const hash = createHash('sha256')
        let size = 0
        stream.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size <= limits.maxFileBytes) hash.update(chunk)
        })
        stream.on('end', () => {
          const outcome: Outcome = fileName.includes('error')
            ? 'error'
            : !SUPPORTED.has(extname(fileName).toLowerCase())
              ? 'file_type_not_supported'
              : size > limits.maxFileBytes
                ? 'file_too_large'
                : 'uploaded'
          results.push({ fileName, size, outcome, sha256: outcome === 'uploaded' ? hash.digest('hex') : null })
        })
      })
      parser.once('close', () => {
        // After an error the parser closes too; the error has answered (this runs in the
        // gateway's process: a second answer would throw there).
        if (x.res.headersSent) return
        if (named) return done(results)
        detail(x, 422, `the upload needs at least one file in the multipart field "${FIELD}" (mock)`)
        done(null)
      })
      parser.on('error', () => {
        if (x.res.headersSent) return
        form.body.unpipe(parser)
        form.body.resume()
        x.req.resume()
        detail(x, 422, 'the multipart body could not be read (mock)')
        done(null)
      })
      // A body that fails (the client went away) fails the parse, which then answers.
      if (form.body !== x.req) form.body.once('error', (error) => parser.destroy(error))
      form.body.pipe(parser)
    })
  }
}
