// Every place a request body can name a stored object that some tenant owns: the one table
// the ownership check walks. An upstream shared by every key (the deployment docs/security.md
// recommends) would serve a call that names another tenant's file, vector store or
// response as if it were the caller's, so each id is checked against its owner before
// anything goes upstream (ownership.ts), wherever in the body it stands.
//
// The table was made by walking OpenAI's published schema (the OpenAPI document) for every
// request-body field of the endpoints the gateway serves whose name or description says it
// holds an id; test/inference/object-ids.test.ts walks it again and fails when a field is
// neither checked here nor listed in NOT_OBJECT_IDS with the reason it names nothing stored.
import { isJsonObject } from '../json.ts'
import type { OwnedKind, RememberedKind } from '../store/ports.ts'

/**
 * Kinds of objects a body can name. The gateway hands out (and records an owner for) the
 * owned and remembered kinds; the others it never creates (no route serves them), so a body
 * that names one names something the caller cannot have made through the gateway: refused
 * alike.
 */
export type ReferencedKind = OwnedKind | RememberedKind | NeverOwnedKind
export type NeverOwnedKind = 'conversation' | 'batch' | 'container' | 'skill'

/** How a field holds its ids. */
type Shape =
  /** A string. */
  | 'id'
  /** A string or a list of strings. */
  | 'ids'

export interface IdField {
  readonly kind: ReferencedKind
  readonly shape: Shape
  /** What the schema says the field holds, for the reader of this table. */
  readonly holds: string
}

/**
 * Fields checked wherever they stand in a body (outside FREE_FORM): their name alone says
 * what they hold. Inside an item a body echoes back (an annotation, a tool call's output)
 * the same name means the same kind.
 */
export const ID_FIELDS: Readonly<Record<string, IdField>> = {
  file_id: {
    kind: 'file',
    shape: 'id',
    holds: 'a file (content parts, image inputs and masks, vector store attach, annotations, tool outputs)',
  },
  file_ids: {
    kind: 'file',
    shape: 'ids',
    holds: 'files (vector store create and batches, code interpreter containers)',
  },
  training_file: { kind: 'file', shape: 'id', holds: "a fine-tuning job's training file" },
  validation_file: { kind: 'file', shape: 'id', holds: "a fine-tuning job's validation file" },
  input_file_id: { kind: 'file', shape: 'id', holds: "a batch's input file" },
  vector_store_id: { kind: 'vector_store', shape: 'id', holds: 'a vector store' },
  vector_store_ids: { kind: 'vector_store', shape: 'ids', holds: 'vector stores (file_search tools, tool resources)' },
  previous_response_id: { kind: 'response', shape: 'id', holds: 'a stored response the call continues' },
  response_id: { kind: 'response', shape: 'id', holds: 'a stored response' },
  conversation: {
    kind: 'conversation',
    shape: 'id',
    holds: 'the conversation a response joins, by id (or as `{id}`, below)',
  },
  conversation_id: { kind: 'conversation', shape: 'id', holds: 'a conversation' },
  batch_id: { kind: 'batch', shape: 'id', holds: 'a batch' },
  fine_tuning_job_id: { kind: 'fine_tuning.job', shape: 'id', holds: 'a fine-tuning job' },
  container: {
    kind: 'container',
    shape: 'id',
    holds: 'a code interpreter container named by id (`{type: "auto"}` is not an id)',
  },
  container_id: { kind: 'container', shape: 'id', holds: 'a container (shell environments, container file citations)' },
  skill_id: { kind: 'skill', shape: 'id', holds: 'a skill' },
}

/**
 * Fields checked only at one place, since their name (`id`) means different things
 * elsewhere. Paths are written as the schema walk writes them: `.field`, `[]` for an item.
 */
export const ID_PATHS: Readonly<Record<string, IdField>> = {
  // An input item given by id (an item_reference, or an output item echoed back with its
  // id) is loaded from where the upstream stored it: it must come from the caller's replies.
  '.input[].id': { kind: 'response.item', shape: 'id', holds: 'an item of a stored response' },
  '.conversation.id': { kind: 'conversation', shape: 'id', holds: 'the conversation a response joins' },
  // A previous audio reply the model is to continue from.
  '.messages[].audio.id': { kind: 'chat.audio', shape: 'id', holds: 'a stored audio reply of a chat completion' },
}

/**
 * Fields whose name or description speaks of an id but that name nothing a tenant owns,
 * with the reason; the schema test accepts them. Keyed by name (anywhere) or by path.
 */
export const NOT_OBJECT_IDS: Readonly<Record<string, string>> = {
  call_id: 'pairs a tool call with its output inside the same request; nothing stored is loaded by it',
  tool_call_id: "pairs a tool message with the assistant's tool call in the same messages list",
  caller_id: 'names the program item of the same input that made a tool call',
  approval_request_id: 'answers an MCP approval request item of the same input',
  '.messages[].tool_calls[].id': "a tool call's id inside the messages the client sends",
  '.input[].pending_safety_checks[].id': 'a safety check of a computer call in the same input',
  '.input[].acknowledged_safety_checks[].id': 'a safety check of a computer call in the same input',
  '.audio.voice.id': "a voice of the account, chosen for the reply; the upstream account's configuration, like a model",
  '.prompt.id':
    "a prompt template of the upstream account; templates are made in its dashboard, not by tenants through the gateway, so they are the platform's, like models (the variables a prompt is given are checked)",
  connector_id:
    "one of the upstream's service connectors (Google Drive, Dropbox): the client authorises it with its own token",
  tunnel_id: 'an MCP tunnel of the upstream account: its configuration, like a model',
  '.mask': "an image edit's mask, as a URL or as an object whose file_id is checked",
  '.integrations[].wandb.name': 'a display name for a run at Weights & Biases, a third party',
  logit_bias: "a map of the tokenizer's token ids to biases",
}

/**
 * Subtrees whose keys the client chooses (metadata, attributes) or that describe data
 * rather than name it (JSON schemas of tools and structured output): a key named `file_id`
 * there is the client's own word, not a reference.
 */
export const FREE_FORM = new Set(['metadata', 'attributes', 'schema', 'parameters', 'input_schema', 'logit_bias'])

/** The last names of ID_PATHS ('id'): only a key of one of these names looks its path up. */
const PATH_NAMES = new Set(Object.keys(ID_PATHS).map((path) => path.slice(path.lastIndexOf('.') + 1)))

/** Maps whose keys the client chooses but whose values may hold ids (a prompt's variables). */
const CLIENT_KEYED = new Set(['.prompt.variables'])

/** One id a body names, and where (for the 404's `param`). */
export interface NamedId {
  readonly kind: ReferencedKind
  readonly id: string
  readonly param: string
}

function idsOf(value: unknown, shape: Shape): string[] {
  if (typeof value === 'string') return [value]
  if (shape === 'ids' && Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string')
  return []
}

/** Every id a JSON body names, wherever it stands. */
export function idsInBody(body: Readonly<Record<string, unknown>>): NamedId[] {
  const found: NamedId[] = []
  // Where the walk stands, for the 404's param; written out only for an id found (a 4 MB
  // body of 20,000 content parts names none, and pays for no strings).
  const trail: Array<string | number> = []
  const paramOf = (name: string): string => {
    let param = ''
    for (const step of trail) param += typeof step === 'number' ? `[${step}]` : param === '' ? step : `.${step}`
    return param === '' ? name : `${param}.${name}`
  }
  const walk = (value: unknown, path: string): void => {
    if (Array.isArray(value)) {
      const items = `${path}[]`
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i]
        if (typeof item !== 'object' || item === null) continue
        trail.push(i)
        walk(item, items)
        trail.pop()
      }
      return
    }
    if (!isJsonObject(value)) return
    const keyed = CLIENT_KEYED.has(path)
    for (const name in value) {
      if (!Object.hasOwn(value, name)) continue
      const child = value[name]
      const nested = typeof child === 'object' && child !== null
      if (nested && FREE_FORM.has(name) && !Array.isArray(child)) continue
      // The schema's maps are written `{}`; a variable's own name is not a field name.
      const field = keyed
        ? undefined
        : ((PATH_NAMES.has(name) ? ID_PATHS[`${path}.${name}`] : undefined) ??
          (Object.hasOwn(ID_FIELDS, name) ? ID_FIELDS[name] : undefined))
      if (field !== undefined)
        for (const id of idsOf(child, field.shape)) found.push({ kind: field.kind, id, param: paramOf(name) })
      if (nested) {
        trail.push(name)
        walk(child, keyed ? `${path}{}` : `${path}.${name}`)
        trail.pop()
      }
    }
  }
  walk(body, '')
  return found
}

/** The ids named by a multipart form's text fields (a form has no nesting). */
export function idsInForm(fields: Readonly<Record<string, string>>): NamedId[] {
  const found: NamedId[] = []
  for (const [name, value] of Object.entries(fields)) {
    const field = Object.hasOwn(ID_FIELDS, name) ? ID_FIELDS[name] : undefined
    if (field !== undefined) found.push({ kind: field.kind, id: value, param: name })
  }
  return found
}
