// The fields the gateway itself reads must be there and of the right type; everything
// else is passed through untouched for the backend to judge.
import type { Endpoint } from '../config/schema.ts'
import { gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'

const missing = (param: string, what: string): Error =>
  gatewayError('missing_field', { message: `Missing required parameter: '${param}' (${what}).`, param })
const invalid = (param: string, what: string): Error =>
  gatewayError('invalid_body', { message: `Invalid type for '${param}': expected ${what}.`, param })

/** The model the body names, after checking that it names one. */
export function modelOf(body: RequestBody): string {
  const value = body.kind === 'json' ? body.value.model : body.kind === 'multipart' ? body.fields.model : undefined
  if (value === undefined || value === null || value === '') throw missing('model', 'a string')
  if (typeof value !== 'string' || value.length > 256) throw invalid('model', 'a string of at most 256 characters')
  return value
}

export function validateBody(endpoint: Endpoint, body: RequestBody): void {
  if (body.kind === 'multipart') {
    const needsFile = endpoint === 'audio.transcriptions' || endpoint === 'audio.translations' || endpoint === 'files.create'
    if (needsFile && !body.files.some((f) => f.field === 'file')) throw missing('file', 'a file part')
    if (endpoint === 'images.edits' && !body.files.some((f) => f.field === 'image' || f.field === 'image[]')) throw missing('image', 'a file part')
    if (endpoint === 'files.create' && !body.fields.purpose) throw missing('purpose', 'a string')
    return
  }
  if (body.kind !== 'json') return
  const v = body.value
  if ('stream' in v && v.stream !== undefined && v.stream !== null && typeof v.stream !== 'boolean') throw invalid('stream', 'a boolean')
  for (const field of ['max_tokens', 'max_completion_tokens', 'max_output_tokens'] as const) {
    const value = v[field]
    if (value !== undefined && value !== null && !(typeof value === 'number' && Number.isInteger(value) && value >= 0)) {
      throw invalid(field, 'a non-negative integer')
    }
  }
  if (v.stream_options !== undefined && v.stream_options !== null && (typeof v.stream_options !== 'object' || Array.isArray(v.stream_options))) {
    throw invalid('stream_options', 'an object')
  }
  switch (endpoint) {
    case 'chat.completions': {
      if (v.messages === undefined) throw missing('messages', 'an array of messages')
      if (!Array.isArray(v.messages) || v.messages.length === 0) throw invalid('messages', 'a non-empty array')
      v.messages.forEach((m: unknown, i: number) => {
        if (!m || typeof m !== 'object' || typeof (m as { role?: unknown }).role !== 'string') throw invalid(`messages[${i}].role`, 'a string')
      })
      break
    }
    case 'completions':
      if (v.prompt === undefined) throw missing('prompt', 'a string or an array')
      break
    case 'embeddings':
      if (v.input === undefined) throw missing('input', 'a string or an array')
      break
    case 'responses':
      if (v.input === undefined) throw missing('input', 'a string or an array')
      break
    case 'images.generations':
      if (typeof v.prompt !== 'string') throw missing('prompt', 'a string')
      break
    case 'fine_tuning.jobs.create':
      if (typeof v.training_file !== 'string') throw missing('training_file', 'a file id')
      break
  }
}
