// The body of an upload as a multipart form, even when its Content-Type says otherwise.
// The provider's Local KB Guide builds one headers dict with "Content-Type: application/json"
// and passes it to every call, the upload too; Python requests keeps a Content-Type the
// caller set, so the guide's upload arrives as multipart bytes labelled JSON (the boundary
// only in the body). A strict FastAPI service would answer 422; the mock reads the boundary
// from the body's first line instead, so the guide runs unchanged.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { PassThrough, type Readable } from 'node:stream'

/** RFC 2046 boundary characters, 1 to 70 of them, on the body's first line. */
const OPENING = /^--([0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?])\r\n/

/** Enough of the body to hold the opening line (two dashes, 70 characters, CRLF). */
const SNIFF_BYTES = 74

export interface FormBody {
  /** Headers for the multipart parser: the request's, or its own with the boundary found. */
  readonly headers: IncomingHttpHeaders
  readonly body: Readable
}

/** The request as a multipart form; null when it is not one (the rest of it is then read and dropped). */
export async function formBody(req: IncomingMessage): Promise<FormBody | null> {
  if ((req.headers['content-type'] ?? '').toLowerCase().startsWith('multipart/form-data'))
    return { headers: req.headers, body: req }
  const { head, ended } = await readHead(req)
  const boundary = OPENING.exec(head.toString('latin1'))?.[1]
  if (boundary === undefined) {
    req.resume()
    return null
  }
  const body = new PassThrough()
  if (ended) {
    body.end(head)
  } else {
    body.write(head)
    req.pipe(body)
    req.once('error', (error) => body.destroy(error))
  }
  return { headers: { ...req.headers, 'content-type': `multipart/form-data; boundary=${boundary}` }, body }
}

/** Reads until SNIFF_BYTES have come (or the body ends), and pauses the request there. */
function readHead(req: IncomingMessage): Promise<{ head: Buffer; ended: boolean }> {
  return new Promise((done) => {
    const chunks: Buffer[] = []
    let size = 0
    const finish = (ended: boolean): void => {
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onEnd)
      req.pause()
      done({ head: Buffer.concat(chunks), ended })
    }
    const onEnd = (): void => finish(true)
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
      size += chunk.length
      if (size >= SNIFF_BYTES) finish(false)
    }
    req.on('data', onData)
    req.once('end', onEnd)
    req.once('error', onEnd)
  })
}
