// The batch's files on the resource backend, where the Files API keeps every file: the
// input read back (its record, then its bytes), and the output and error files uploaded
// as the client's own (their ownership recorded, as files.create records it), so
// files.retrieve, files.content and files.delete serve them like any other file.
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type { UpstreamRequest } from '../backends/port.ts'
import { gatewayError } from '../errors.ts'
import type { MultipartBody } from '../http/body.ts'
import { detachedClient } from '../proxy/detached-client.ts'
import type { Runtime } from '../runtime/snapshot.ts'
import type { OwnershipStore } from '../store/ports.ts'

async function readAll(body: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > limit) {
      body.destroy()
      throw gatewayError('body_too_large', { message: `The batch's input file is larger than ${limit} bytes.` })
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks)
}

async function call(
  runtime: Runtime,
  request: Pick<UpstreamRequest, 'endpoint' | 'method' | 'path' | 'body'>,
  limit: number,
): Promise<{ status: number; bytes: Buffer }> {
  const id = `batch_io_${randomBytes(6).toString('hex')}`
  const response = await runtime.registry.resources.adapter.send({
    ...request,
    model: null,
    requestId: id,
    signal: AbortSignal.timeout(60_000),
    client: detachedClient(request.method, request.path),
  })
  return { status: response.status, bytes: await readAll(response.body, limit) }
}

/** A file's record on the resource backend (its purpose and size), or null when it has none. */
export async function fileRecord(runtime: Runtime, fileId: string): Promise<{ purpose: string; bytes: number } | null> {
  const path = `/files/${encodeURIComponent(fileId)}`
  const { status, bytes } = await call(
    runtime,
    { endpoint: 'files.list', method: 'GET', path, body: { kind: 'none' } },
    1 << 20,
  )
  if (status !== 200) return null
  const record = JSON.parse(bytes.toString('utf8')) as { purpose?: unknown; bytes?: unknown }
  return { purpose: String(record.purpose), bytes: Number(record.bytes) }
}

/** A file's bytes as text, up to `limit` bytes. */
export async function fileText(runtime: Runtime, fileId: string, limit: number): Promise<string> {
  const path = `/files/${encodeURIComponent(fileId)}/content`
  const { status, bytes } = await call(
    runtime,
    { endpoint: 'files.content', method: 'GET', path, body: { kind: 'none' } },
    limit,
  )
  if (status !== 200)
    throw gatewayError('upstream_bad_response', { message: `The batch's input file could not be read (${status}).` })
  return bytes.toString('utf8')
}

/** Uploads `content` as a file of `owner` (purpose "batch"); returns its id. */
export async function uploadFile(
  runtime: Runtime,
  ownership: OwnershipStore,
  owner: string,
  filename: string,
  content: Buffer,
): Promise<string> {
  const boundary = `tollgate-batch-${randomBytes(12).toString('hex')}`
  const bytes = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\n` +
        `Content-Type: application/jsonl\r\n\r\n`,
    ),
    content,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ])
  const body: MultipartBody = {
    kind: 'multipart',
    fields: { purpose: 'batch' },
    files: [{ field: 'file', filename, mimeType: 'application/jsonl', size: content.length }],
    contentType: `multipart/form-data; boundary=${boundary}`,
    size: bytes.length,
    open: () => Readable.from([bytes]),
    dispose: async () => {},
  }
  const reply = await call(runtime, { endpoint: 'files.create', method: 'POST', path: '/files', body }, 1 << 20)
  const created = JSON.parse(reply.bytes.toString('utf8')) as { id?: unknown }
  if (reply.status !== 200 || typeof created.id !== 'string')
    throw gatewayError('upstream_bad_response', {
      message: `The batch's result file could not be stored (${reply.status}).`,
    })
  await ownership.claim('file', created.id, owner)
  return created.id
}

/**
 * Deletes a file the batch uploaded and no batch names (one written by an instance that
 * lost the batch's lease before it could record it: finalize.ts). Gone already is deleted.
 */
export async function deleteFile(runtime: Runtime, ownership: OwnershipStore, fileId: string): Promise<void> {
  const path = `/files/${encodeURIComponent(fileId)}`
  const { status } = await call(
    runtime,
    { endpoint: 'files.delete', method: 'DELETE', path, body: { kind: 'none' } },
    1 << 20,
  )
  if (status !== 200 && status !== 404)
    throw gatewayError('upstream_bad_response', { message: `A batch's unused file could not be deleted (${status}).` })
  await ownership.release('file', fileId)
}
