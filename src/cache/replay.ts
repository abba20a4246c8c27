// A hit answered in the shape the caller asked for: the stored reply (assemble.ts) as JSON,
// or synthesised into the stream the endpoint would have sent (chat and completions chunks
// ending in [DONE]; the Responses API's typed events ending in response.completed), with
// a usage chunk when the call asked for one (stream_options.include_usage). The reply gets
// a fresh id and created time: a cached reply is a new answer the caller may tell apart;
// the original id goes in x-tollgate-cache-origin-id.
import { randomBytes } from 'node:crypto'
import type { CachedEndpoint } from './key-fields.ts'

type Json = Record<string, unknown>
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The stored reply with a fresh id and creation time (embeddings have neither). */
export function refreshed(endpoint: CachedEndpoint, reply: Json, nowSeconds: number): Json {
  if (endpoint === 'embeddings') return reply
  const id = typeof reply.id === 'string' ? freshId(reply.id) : reply.id
  return endpoint === 'responses' ? { ...reply, id, created_at: nowSeconds } : { ...reply, id, created: nowSeconds }
}

/** Same prefix (`chatcmpl-`, `cmpl-`, `resp_`), new random part. */
function freshId(original: string): string {
  const cut = Math.max(original.lastIndexOf('-'), original.lastIndexOf('_'))
  return `${cut > 0 ? original.slice(0, cut + 1) : 'cache-'}${randomBytes(12).toString('hex')}`
}

/** The frames of the stream the endpoint would have sent for `reply`. */
export function streamFrames(endpoint: CachedEndpoint, reply: Json, includeUsage: boolean): string[] {
  if (endpoint === 'responses') return responseEvents(reply)
  const frames =
    endpoint === 'chat.completions' ? chatChunks(reply, includeUsage) : completionChunks(reply, includeUsage)
  return [...frames.map((f) => `data: ${JSON.stringify(f)}\n\n`), 'data: [DONE]\n\n']
}

const choicesOf = (reply: Json): Json[] => (Array.isArray(reply.choices) ? reply.choices.filter(isObject) : [])

function chunkHead(reply: Json, object: string): Json {
  return {
    id: reply.id,
    object,
    created: reply.created,
    model: reply.model,
    ...(typeof reply.system_fingerprint === 'string' ? { system_fingerprint: reply.system_fingerprint } : {}),
  }
}

function usageTail(head: Json, reply: Json, includeUsage: boolean): Json[] {
  return includeUsage && isObject(reply.usage) ? [{ ...head, choices: [], usage: reply.usage }] : []
}

function chatChunks(reply: Json, includeUsage: boolean): Json[] {
  const head = chunkHead(reply, 'chat.completion.chunk')
  const nullUsage = includeUsage ? { usage: null } : {}
  const choices = choicesOf(reply)
  const deltas = choices.map((c) => {
    const message = isObject(c.message) ? c.message : {}
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : []
    const delta: Json = { role: message.role ?? 'assistant', content: message.content ?? null }
    if (typeof message.refusal === 'string') delta.refusal = message.refusal
    if (calls.length > 0) delta.tool_calls = calls.map((call, index) => ({ index, ...call }))
    return { ...head, choices: [{ index: c.index, delta, logprobs: null, finish_reason: null }], ...nullUsage }
  })
  const ends = choices.map((c) => ({
    ...head,
    choices: [{ index: c.index, delta: {}, logprobs: null, finish_reason: c.finish_reason ?? 'stop' }],
    ...nullUsage,
  }))
  return [...deltas, ...ends, ...usageTail(head, reply, includeUsage)]
}

function completionChunks(reply: Json, includeUsage: boolean): Json[] {
  const head = chunkHead(reply, 'text_completion')
  const choices = choicesOf(reply)
  const texts = choices.map((c) => ({
    ...head,
    choices: [{ index: c.index, text: c.text ?? '', logprobs: null, finish_reason: null }],
  }))
  const ends = choices.map((c) => ({
    ...head,
    choices: [{ index: c.index, text: '', logprobs: null, finish_reason: c.finish_reason ?? 'stop' }],
  }))
  return [...texts, ...ends, ...usageTail(head, reply, includeUsage)]
}

function responseEvents(response: Json): string[] {
  const events: Json[] = []
  const add = (type: string, fields: Json): void => {
    events.push({ type, sequence_number: events.length, ...fields })
  }
  const opening = { ...response, status: 'in_progress', output: [], usage: null }
  add('response.created', { response: opening })
  add('response.in_progress', { response: opening })
  const output = Array.isArray(response.output) ? response.output.filter(isObject) : []
  output.forEach((item, outputIndex) => {
    const parts = item.type === 'message' && Array.isArray(item.content) ? item.content.filter(isObject) : []
    add('response.output_item.added', {
      output_index: outputIndex,
      item: { ...item, status: 'in_progress', ...(item.type === 'message' ? { content: [] } : {}) },
    })
    parts.forEach((part, contentIndex) => {
      const at = { item_id: item.id, output_index: outputIndex, content_index: contentIndex }
      if (part.type !== 'output_text') {
        add('response.content_part.added', { ...at, part })
        add('response.content_part.done', { ...at, part })
        return
      }
      const text = typeof part.text === 'string' ? part.text : ''
      add('response.content_part.added', { ...at, part: { ...part, text: '' } })
      add('response.output_text.delta', { ...at, delta: text, logprobs: [] })
      add('response.output_text.done', { ...at, text, logprobs: [] })
      add('response.content_part.done', { ...at, part })
    })
    add('response.output_item.done', { output_index: outputIndex, item })
  })
  add('response.completed', { response })
  return events.map((e) => `event: ${String(e.type)}\ndata: ${JSON.stringify(e)}\n\n`)
}
