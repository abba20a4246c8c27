// A JSON Schema (function parameters, response_format's json_schema) as Gemini's Schema
// object, the OpenAPI 3.0 subset its API reference describes (ai.google.dev/api/caching#Schema):
// upper-case types, `nullable` for a type that may be null, references to $defs inlined.
// A keyword Gemini has no counterpart for is refused, naming it, not dropped: the output
// would be held to less than the caller asked.
import { gatewayError, type GatewayError } from '../../errors.ts'
import { isJsonObject, type JsonObject } from '../../json.ts'

/** Keywords kept as they are. */
const KEPT = new Set([
  'format',
  'title',
  'description',
  'enum',
  'maxItems',
  'minItems',
  'minProperties',
  'maxProperties',
  'minLength',
  'maxLength',
  'pattern',
  'example',
  'default',
  'minimum',
  'maximum',
  'propertyOrdering',
  'required',
  'nullable',
])
/**
 * Keywords that constrain nothing Gemini would generate otherwise: annotations, and
 * `additionalProperties: false` (Gemini's output has the declared properties only; any
 * other value of it is refused below).
 */
const IGNORED = new Set(['$schema', '$id', '$comment', 'examples', 'strict', '$defs', 'definitions'])
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object', 'null'])
/** References nest no deeper than this: deeper is a recursive schema, which Gemini's Schema cannot say. */
const MAX_DEPTH = 32

const unsupported = (at: string, why: string): GatewayError =>
  gatewayError('untranslatable_feature', {
    message: `${at} is not supported by this model's upstream (Google Gemini): ${why}.`,
    param: at,
  })

export function geminiSchemaOf(schema: JsonObject, at: string): JsonObject {
  const defs = { ...asObject(schema.definitions), ...asObject(schema.$defs) }
  return convert(schema, at, defs, 0)
}

function asObject(value: unknown): JsonObject {
  return isJsonObject(value) ? value : {}
}

function convert(schema: JsonObject, at: string, defs: JsonObject, depth: number): JsonObject {
  if (depth > MAX_DEPTH) throw unsupported(at, 'a recursive schema has no counterpart in its Schema object')
  if (typeof schema.$ref === 'string') {
    const name = /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(schema.$ref)?.[1]
    const target = name === undefined ? undefined : defs[name]
    if (!isJsonObject(target)) throw unsupported(`${at}.$ref`, 'only references to $defs can be inlined')
    return convert({ ...target, ...without(schema, '$ref') }, at, defs, depth + 1)
  }
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(schema)) {
    if (KEPT.has(key)) out[key] = value
    else if (IGNORED.has(key)) continue
    else if (key === 'additionalProperties') {
      if (value !== false)
        throw unsupported(`${at}.additionalProperties`, 'objects hold their declared properties only')
    } else if (key === 'type') Object.assign(out, typeOf(value, at))
    else if (key === 'const') out.enum = [value]
    else if (key === 'properties') {
      const properties: JsonObject = {}
      for (const [name, sub] of Object.entries(asObject(value)))
        properties[name] = convert(asObject(sub), `${at}.properties.${name}`, defs, depth + 1)
      out.properties = properties
    } else if (key === 'items') out.items = convert(asObject(value), `${at}.items`, defs, depth + 1)
    else if (key === 'anyOf' && Array.isArray(value))
      out.anyOf = value.map((sub: unknown, i) => convert(asObject(sub), `${at}.anyOf[${i}]`, defs, depth + 1))
    else throw unsupported(`${at}.${key}`, 'its Schema object has no such keyword')
  }
  return out
}

/** `type` as Gemini writes it: one upper-case type, `nullable` for a union with null. */
function typeOf(value: unknown, at: string): JsonObject {
  const list = Array.isArray(value) ? value : [value]
  const named = list.filter((t) => t !== 'null')
  if (list.some((t) => typeof t !== 'string' || !TYPES.has(t)) || named.length > 1)
    throw unsupported(`${at}.type ${JSON.stringify(value)}`, 'a property has one type (or that type and null)')
  const nullable = named.length < list.length
  const type = named[0] ?? 'null'
  return { type: String(type).toUpperCase(), ...(nullable && named.length > 0 ? { nullable: true } : {}) }
}

function without(schema: JsonObject, key: string): JsonObject {
  const { [key]: _dropped, ...rest } = schema
  return rest
}
