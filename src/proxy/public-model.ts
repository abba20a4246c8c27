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

/** Objects that say which service tier served them (OpenAI's chat completions, their chunks, responses). */
const TIERED = new Set(['chat.completion', 'chat.completion.chunk', 'response'])

/**
 * `body` (and a responses-API event's `response`) saying `serviceTier` served it, as OpenAI's
 * replies do (priority/classes.ts): the gateway's class, not the upstream's word. The same
 * object when there was nothing to change.
 */
export function withServiceTier(body: unknown, serviceTier: string): unknown {
  if (!isJsonObject(body)) return body
  let out = body
  if (TIERED.has(String(body.object)) && body.service_tier !== serviceTier) out = { ...out, service_tier: serviceTier }
  const response = body.response
  if (isJsonObject(response) && TIERED.has(String(response.object)) && response.service_tier !== serviceTier) {
    out = { ...out, response: { ...response, service_tier: serviceTier } }
  }
  return out
}

/** What the client is shown of `body`: the model it asked for, the service tier that served it. */
export function asShown(body: unknown, publicModel: string | undefined, serviceTier: string | undefined): unknown {
  const renamed = publicModel === undefined ? body : withPublicModel(body, publicModel)
  return serviceTier === undefined ? renamed : withServiceTier(renamed, serviceTier)
}
