// Builds real multipart/form-data bodies for tests: the bytes a client would send, and the
// MultipartBody the gateway's own reader (src/http/body.ts) makes of them.
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import { readMultipartBody, type MultipartBody } from '../../src/http/body.ts'

export type Part =
  | { readonly name: string; readonly value: string }
  | { readonly name: string; readonly filename: string; readonly data: Buffer; readonly contentType?: string }

const BOUNDARY = '----tollgate-test-boundary-7MA4YWxkTrZu0gW'

export function encodeMultipart(parts: readonly Part[]): { contentType: string; bytes: Buffer } {
  const chunks: Buffer[] = []
  for (const part of parts) {
    if ('value' in part) {
      chunks.push(
        Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value}\r\n`),
      )
    } else {
      chunks.push(
        Buffer.from(
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\n` +
            `Content-Type: ${part.contentType ?? 'application/octet-stream'}\r\n\r\n`,
        ),
        part.data,
        Buffer.from('\r\n'),
      )
    }
  }
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`))
  return { contentType: `multipart/form-data; boundary=${BOUNDARY}`, bytes: Buffer.concat(chunks) }
}

/** Reads `parts` through readMultipartBody, spooling to `spoolDir` (e.g. t.testdir()). */
export async function multipartBody(parts: readonly Part[], spoolDir: string): Promise<MultipartBody> {
  const { contentType, bytes } = encodeMultipart(parts)
  const req = Object.assign(Readable.from([bytes]), {
    headers: { 'content-type': contentType, 'content-length': String(bytes.length) },
  })
  return readMultipartBody(req as unknown as IncomingMessage, 64 * 1024 * 1024, spoolDir)
}
