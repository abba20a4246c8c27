// An upstream's error in OpenAI's shape, relayed with FastAPI's `detail` beside it (the
// message again), as the gateway's own errors carry it (src/errors.ts): a client that
// reads `.detail`, as the provider's customers do, finds the message on every error.
import { isJsonObject } from '../json.ts'

/** `body` with `detail` added when it is an error status's `{"error": {"message": ...}}` without one; else `body` itself. */
export function withErrorDetail(status: number, body: unknown): unknown {
  if (status < 400 || !isJsonObject(body) || 'detail' in body) return body
  const error = body.error
  if (!isJsonObject(error) || typeof error.message !== 'string') return body
  return { ...body, detail: error.message }
}
