// Reading an upstream's body whole, for the adapters that translate a reply (gemini, bedrock):
// an error body to say what went wrong, or a whole JSON reply to turn into a chat completion.
import type { Readable } from 'node:stream'
import { gatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'

/** The body's bytes up to `limit`: past it, cut short (`truncate`) or refused as a bad response. */
export async function readAll(body: Readable, limit: number, truncate: boolean): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      chunks.push(chunk)
      size += chunk.length
      if (size >= limit) {
        if (!truncate) throw gatewayError('upstream_bad_response', { message: 'The upstream reply is too large.' })
        break
      }
    }
  } catch (err) {
    // An error body cut short still says what it had said so far.
    if (!truncate) throw err
  } finally {
    body.destroy()
  }
  return Buffer.concat(chunks).subarray(0, limit)
}

/**
 * A whole JSON reply of at most `limit` bytes, read and turned into the one chat completion
 * `translate` makes of it; a reply that is not a JSON object is the upstream's bad response.
 */
export async function* translatedWhole(
  body: Readable,
  limit: number,
  translate: (reply: JsonObject) => unknown,
): AsyncGenerator<Buffer> {
  const text = (await readAll(body, limit, false)).toString('utf8')
  let reply: unknown
  try {
    reply = JSON.parse(text)
  } catch (err) {
    throw gatewayError('upstream_bad_response', { cause: err })
  }
  if (!isJsonObject(reply)) throw gatewayError('upstream_bad_response')
  yield Buffer.from(JSON.stringify(translate(reply)))
}
