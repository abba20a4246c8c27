// Objects a reply hands out that a later call may name: a stored response (for
// `previous_response_id`), its output items (echoed back by id, or by `item_reference`),
// a chat completion's audio (`messages[].audio.id`). They are remembered as the caller's
// before the reply's last bytes go out, so the body check (object-ids.ts) lets the caller,
// and nobody else, name them. Read from the JSON body, or from the stream's events.
import { isJsonObject, type JsonObject } from '../json.ts'
import type { Logger } from '../observability/logger.ts'
import type { Endpoint } from '../config/schema.ts'
import type { OwnershipStore, RememberedKind } from '../store/ports.ts'

/** How long a reply's objects stay the caller's to name: OpenAI keeps a stored response 30 days. */
export const REMEMBER_MS = 30 * 24 * 3600 * 1000

/**
 * Whether this call's reply hands out objects worth remembering: every response, and a
 * chat completion only when it asked for audio (the usual chat stream is not read for it).
 */
function handsOut(endpoint: Endpoint, request: JsonObject | null): boolean {
  if (endpoint === 'responses') return true
  if (endpoint !== 'chat.completions' || request === null) return false
  return isJsonObject(request.audio) || (Array.isArray(request.modalities) && request.modalities.includes('audio'))
}

/** Ids of a reply, by kind; a Set each, since a stream names the same response many times. */
type Found = Record<RememberedKind, Set<string>>

export interface ReplyObjects {
  /** Reads one JSON body or stream event of the reply. */
  observe(data: unknown): void
  /** Remembers what was observed since the last flush. Never throws: a failure is logged. */
  flush(): Promise<void>
}

export function replyObjectsOf(
  endpoint: Endpoint,
  request: JsonObject | null,
  store: OwnershipStore,
  owner: string,
  log: Logger,
): ReplyObjects | undefined {
  if (!handsOut(endpoint, request)) return undefined
  let found: Found = empty()
  return {
    observe(data) {
      if (isJsonObject(data)) collect(data, found)
    },
    async flush() {
      const pending = found
      found = empty()
      const writes = Object.entries(pending)
        .filter(([, ids]) => ids.size > 0)
        .map(([kind, ids]) => store.remember(kind as RememberedKind, [...ids], owner, REMEMBER_MS))
      try {
        await Promise.all(writes)
      } catch (err) {
        // The reply still goes out; the caller will get a 404 naming these objects later.
        log.warn({ err }, "could not record the objects of a reply as the caller's")
      }
    },
  }
}

function empty(): Found {
  return { response: new Set(), 'response.item': new Set(), 'chat.audio': new Set() }
}

function add(set: Set<string>, id: unknown): void {
  if (typeof id === 'string' && id.length > 0) set.add(id)
}

function collectResponse(response: JsonObject, found: Found): void {
  add(found.response, response.id)
  if (Array.isArray(response.output))
    for (const item of response.output) if (isJsonObject(item)) add(found['response.item'], item.id)
}

/** A body or event of either endpoint. */
function collect(data: JsonObject, found: Found): void {
  // Responses: the body itself, or an event carrying the response or one item.
  if (data.object === 'response') collectResponse(data, found)
  if (isJsonObject(data.response)) collectResponse(data.response, found)
  if (typeof data.type === 'string' && data.type.startsWith('response.output_item.') && isJsonObject(data.item))
    add(found['response.item'], data.item.id)
  // Chat completions: a message's audio, or a delta's.
  if (Array.isArray(data.choices)) {
    for (const choice of data.choices) {
      if (!isJsonObject(choice)) continue
      for (const part of [choice.message, choice.delta]) {
        if (isJsonObject(part) && isJsonObject(part.audio)) add(found['chat.audio'], part.audio.id)
      }
    }
  }
}
