// Upstreams name their own deployment in replies ("mistralai/Mistral-Small-24B" for the
// public "Mistral-Small-24B-Instruct-2501"). Clients should see the name they asked
// for: it is what their SDKs compare against, and internal names are not theirs to know.
import { isJsonObject } from '../json.ts'

/**
 * `body` with its `model` (and a responses-API event's `response.model`) set to
 * `publicModel`; the same object when there was nothing to change.
 */
export function withPublicModel(body: unknown, publicModel: string): unknown {
  if (!isJsonObject(body)) return body
  let out = body
  if (typeof body.model === 'string' && body.model !== publicModel) out = { ...out, model: publicModel }
  const response = body.response
  if (isJsonObject(response) && typeof response.model === 'string' && response.model !== publicModel) {
    out = { ...out, response: { ...response, model: publicModel } }
  }
  return out
}
