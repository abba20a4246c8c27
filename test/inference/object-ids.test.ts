// The table of id-bearing body fields (src/inference/object-ids.ts) against OpenAI's
// published schema: every request-body field of an endpoint the gateway serves whose name
// or description says it holds an id is either checked or listed, with a reason, as naming
// nothing a tenant owns. A schema update that adds one fails here until the table says
// which it is.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { FREE_FORM, ID_FIELDS, ID_PATHS, NOT_OBJECT_IDS, idsInBody, idsInForm } from '../../src/inference/object-ids.ts'
import { PROXIED_ENDPOINTS } from '../../src/inference/endpoints.ts'
import { V1_ENDPOINTS } from '../../src/inference/v1-endpoints.ts'

type Schema = Record<string, unknown>
const doc = JSON.parse(readFileSync(join(import.meta.dirname, '../fixtures/openai/openapi.json'), 'utf8')) as {
  paths: Record<string, Record<string, Schema>>
}

function resolve(ref: string): Schema {
  return ref
    .replace(/^#\//, '')
    .split('/')
    .reduce<Record<string, unknown>>(
      (node, part) => node[part] as Record<string, unknown>,
      doc as unknown as Record<string, unknown>,
    )
}

interface SchemaField {
  readonly name: string
  readonly path: string
  readonly description: string
  /** The walk passed through a FREE_FORM key to reach it. */
  readonly free: boolean
  readonly operation: string
}

/** Every property of a request body, with its path as object-ids.ts writes paths. */
function fieldsOf(
  schema: unknown,
  path: string,
  seen: ReadonlySet<string>,
  operation: string,
  free: boolean,
  out: SchemaField[],
): void {
  if (typeof schema !== 'object' || schema === null) return
  const s = schema as Schema
  if (typeof s.$ref === 'string') {
    if (seen.has(s.$ref)) return
    fieldsOf(resolve(s.$ref), path, new Set([...seen, s.$ref]), operation, free, out)
    return
  }
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    if (Array.isArray(s[key])) for (const part of s[key] as unknown[]) fieldsOf(part, path, seen, operation, free, out)
  }
  if (s.items !== undefined) fieldsOf(s.items, `${path}[]`, seen, operation, free, out)
  if (typeof s.additionalProperties === 'object')
    fieldsOf(s.additionalProperties, `${path}{}`, seen, operation, free, out)
  if (typeof s.properties === 'object' && s.properties !== null) {
    for (const [name, child] of Object.entries(s.properties as Record<string, Schema>)) {
      const described =
        typeof child.description === 'string'
          ? child.description
          : typeof child.$ref === 'string'
            ? String(resolve(child.$ref).description ?? '')
            : ''
      out.push({ name, path: `${path}.${name}`, description: described, free, operation })
      fieldsOf(child, `${path}.${name}`, seen, operation, free || FREE_FORM.has(name), out)
    }
  }
}

/** The schema's paths of the endpoints the gateway serves (`:param` and `{param}` alike). */
const shape = (route: string): string => route.replace(/[:{]([a-z_]+)\}?/g, '*')
const served = new Set([...PROXIED_ENDPOINTS, ...V1_ENDPOINTS].map((spec) => `${spec.method} ${shape(spec.route)}`))

const fields: SchemaField[] = []
for (const [path, operations] of Object.entries(doc.paths)) {
  for (const [method, operation] of Object.entries(operations)) {
    const name = `${method.toUpperCase()} ${path}`
    if (!served.has(`${method.toUpperCase()} ${shape(path)}`)) continue
    const content =
      (operation.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined)?.content ?? {}
    for (const media of Object.values(content)) fieldsOf(media.schema, '', new Set(), name, false, fields)
  }
}

/** What a reader of the schema would take for an id of something: the name or the description says so. */
const CALLED_IDS = new Set(['conversation', 'container', 'training_file', 'validation_file'])
function namesAnId(field: SchemaField): boolean {
  return (
    field.name === 'id' || /_ids?$/.test(field.name) || CALLED_IDS.has(field.name) || /\bIDs?\b/.test(field.description)
  )
}

/** Id-ish by description, but values the gateway checks elsewhere or that are the client's own. */
const CHECKED_ELSEWHERE: Record<string, string> = {
  model: 'the model: resolved and scope-checked by the corridor before anything else',
  user: "the end user's id in the client's own system, passed on for abuse monitoring",
  safety_identifier: "the end user's id in the client's own system",
  prompt_cache_key: 'a cache-bucketing key the client chooses',
  suffix: 'a name suffix for a fine-tuned model',
  seed: 'a number the client chooses',
  filename: 'a file name the client chooses for an inline file',
}

t.test('the served endpoints are found in the schema', async (t) => {
  const operations = new Set(fields.map((f) => f.operation))
  for (const op of [
    'POST /responses',
    'POST /chat/completions',
    'POST /fine_tuning/jobs',
    'POST /vector_stores/{vector_store_id}/file_batches',
  ]) {
    t.ok(operations.has(op), op)
  }
  t.ok(fields.length > 500, `${fields.length} request fields walked`)
})

t.test('every id-bearing request field of a served endpoint is checked or exempt, with a reason', async (t) => {
  const uncovered = new Map<string, string>()
  const checked = new Set<string>()
  for (const field of fields.filter(namesAnId)) {
    const exempt = NOT_OBJECT_IDS[field.path] ?? NOT_OBJECT_IDS[field.name] ?? CHECKED_ELSEWHERE[field.name]
    const rule = ID_PATHS[field.path] ?? (field.name !== 'id' ? ID_FIELDS[field.name] : undefined)
    if (exempt !== undefined) continue
    if (rule !== undefined && !field.free) {
      checked.add(field.path)
      continue
    }
    // Under a FREE_FORM key the walk would not see it: the table must not hide a real field.
    uncovered.set(
      `${field.operation} ${field.path}`,
      field.free ? 'under a free-form key' : field.description.slice(0, 80),
    )
  }
  t.same(Object.fromEntries(uncovered), {}, 'fields the table does not cover')
  for (const path of [
    '.previous_response_id',
    '.tools[].vector_store_ids',
    '.input[].content[].file_id',
    '.messages[].content[].file.file_id',
    '.conversation',
    '.training_file',
    '.files[].file_id',
    '.file_ids',
    '.input[].id',
  ]) {
    t.ok(checked.has(path), `checked: ${path}`)
  }
})

t.test('every exemption names a field the schema has', async (t) => {
  const names = new Set(fields.map((f) => f.name))
  const paths = new Set(fields.map((f) => f.path))
  for (const entry of Object.keys(NOT_OBJECT_IDS))
    t.ok(entry.startsWith('.') ? paths.has(entry) : names.has(entry), entry)
  for (const path of Object.keys(ID_PATHS)) t.ok(paths.has(path), path)
})

t.test('the walk finds ids wherever the schema puts them, and nothing in free-form parts', async (t) => {
  const found = idsInBody({
    model: 'm',
    previous_response_id: 'resp_1',
    conversation: { id: 'conv_1' },
    input: [
      { type: 'item_reference', id: 'msg_1' },
      {
        role: 'user',
        content: [
          { type: 'input_file', file_id: 'file-1' },
          { type: 'input_image', file_id: 'file-2' },
        ],
      },
    ],
    tools: [
      { type: 'file_search', vector_store_ids: ['vs_1', 'vs_2'] },
      { type: 'code_interpreter', container: { type: 'auto', file_ids: ['file-3'] } },
      {
        type: 'function',
        name: 'f',
        parameters: { type: 'object', properties: { file_id: { type: 'string' } }, examples: [{ file_id: 'file-x' }] },
      },
    ],
    prompt: { id: 'pmpt_1', variables: { file_id: 'just text', doc: { type: 'input_file', file_id: 'file-4' } } },
    metadata: { file_id: 'file-y', vector_store_id: 'vs_y' },
    text: {
      format: { type: 'json_schema', name: 's', schema: { properties: { previous_response_id: { const: 'resp_x' } } } },
    },
  })
  t.same(
    found.map((f) => `${f.kind} ${f.id} ${f.param}`).sort(),
    [
      'conversation conv_1 conversation.id',
      'file file-1 input[1].content[0].file_id',
      'file file-2 input[1].content[1].file_id',
      'file file-3 tools[1].container.file_ids',
      'file file-4 prompt.variables.doc.file_id',
      'response resp_1 previous_response_id',
      'response.item msg_1 input[0].id',
      'vector_store vs_1 tools[0].vector_store_ids',
      'vector_store vs_2 tools[0].vector_store_ids',
    ].sort(),
  )
  t.same(
    idsInBody({
      messages: [
        { role: 'user', content: [{ type: 'file', file: { file_id: 'file-5' } }] },
        { role: 'assistant', audio: { id: 'audio_1' }, tool_calls: [{ id: 'call_1' }] },
      ],
    }).map((f) => `${f.kind} ${f.id}`),
    ['file file-5', 'chat.audio audio_1'],
  )
  t.same(
    idsInBody({ tools: [{ type: 'code_interpreter', container: 'cntr_1' }] }).map((f) => f.kind),
    ['container'],
  )
  t.same(
    idsInForm({ model: 'm', file_id: 'file-6' }).map((f) => `${f.kind} ${f.id}`),
    ['file file-6'],
  )
})
