// What Python `requests` puts on the wire, for tests that carry the provider's documented
// Python examples over as fetch calls: `params` (a list becomes the key repeated), `data`
// (sent as given), `json` (and Content-Type: application/json unless the caller set one),
// and `files` as multipart/form-data, with one detail the provider's guides depend on:
// requests keeps a Content-Type the caller set, so a headers dict that says
// application/json labels a multipart upload as JSON (the boundary is then only in the body).
import { randomBytes } from 'node:crypto'

export type Params = Readonly<Record<string, string | readonly string[]>>

export interface PyFile {
  /** requests sends the base name of the opened file. */
  readonly filename: string
  readonly data: Buffer
}

export interface PyRequest {
  readonly headers?: Readonly<Record<string, string>>
  readonly params?: Params
  readonly data?: string
  readonly json?: unknown
  /** [field, file] pairs, as `files=[("files", open(path, "rb")), ...]`. */
  readonly files?: ReadonlyArray<readonly [string, PyFile]>
}

/** `requests.get/post(url, headers=, params=, data=, json=, files=)` as fetch. */
export function pyRequest(method: 'GET' | 'POST', url: string, options: PyRequest = {}): Promise<Response> {
  const target = new URL(url)
  // urlencode(params, doseq=True): a list is its key repeated, in order.
  for (const [key, value] of Object.entries(options.params ?? {})) {
    for (const v of typeof value === 'string' ? [value] : value) target.searchParams.append(key, v)
  }
  const headers: Record<string, string> = {
    'user-agent': 'python-requests/2.32.3',
    accept: '*/*',
    ...lowerKeys(options.headers ?? {}),
  }
  let body: string | Buffer | undefined
  let contentType: string | undefined
  if (options.files !== undefined) {
    const boundary = randomBytes(16).toString('hex')
    body = Buffer.concat([
      ...options.files.flatMap(([field, file]) => [
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="${file.filename}"\r\n\r\n`,
        ),
        file.data,
        Buffer.from('\r\n'),
      ]),
      Buffer.from(`--${boundary}--\r\n`),
    ])
    contentType = `multipart/form-data; boundary=${boundary}`
  } else if (options.data !== undefined) {
    body = options.data
  } else if (options.json !== undefined) {
    body = JSON.stringify(options.json)
    contentType = 'application/json'
  } else if (method === 'POST') {
    body = '' // requests sends Content-Length: 0 on a POST without a body
  }
  // "Add content-type if it wasn't explicitly provided" (requests.models.prepare_body).
  if (contentType !== undefined && headers['content-type'] === undefined) headers['content-type'] = contentType
  return fetch(target, { method, headers, ...(body === undefined ? {} : { body }) })
}

function lowerKeys(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]))
}
