// Builds the OpenAPI 3.1 document from the routes' OperationDocs. Every schema in it is
// converted from zod (zod 4's JSON Schema conversion, draft 2020-12, which is OpenAPI
// 3.1's dialect): the schemas that validate the requests are the ones the document shows.
// Named schemas and each operation's body and reply become components, so the reference
// links them; the refusals every route shares are added from its kind of security.
import { z } from 'zod'
import { DetailBody, ErrorBody } from '../api/common.ts'
import type { OperationDoc, ResponseDoc, Security } from './operation.ts'

export interface DocumentInfo {
  readonly title: string
  readonly version: string
  readonly description: string
}

/** Tags in groups, for Redoc's side menu (x-tagGroups); a tag in no group is refused. */
export type TagGroups = ReadonlyArray<{ readonly name: string; readonly tags: readonly string[] }>

export type OpenApiDocument = Record<string, unknown> & {
  readonly openapi: string
  readonly paths: Record<string, Record<string, Record<string, unknown>>>
  readonly components: { readonly schemas: Record<string, unknown> } & Record<string, unknown>
}

type Json = Record<string, unknown>

const SAFE_INT = Number.MAX_SAFE_INTEGER

const SECURITY_SCHEMES: Record<string, Json> = {
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key made in the key portal (`tg1_…`): `Authorization: Bearer <API_KEY>`.',
  },
  apiKeyHeader: {
    type: 'apiKey',
    in: 'header',
    name: 'api-key',
    description:
      'The same API key in an `api-key` header, as Azure OpenAI clients send it. Sent together with a Bearer key, both must be the same key (else 401).',
  },
  admin: {
    type: 'http',
    scheme: 'bearer',
    description: 'The admin token (TOLLGATE_ADMIN_TOKEN): `Authorization: Bearer <TOKEN>`.',
  },
  session: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'An access token from POST /api/v1/auth/user.',
  },
}

/** The schemes each kind of caller may authenticate with, any one of them. */
const SCHEMES_OF: Record<Exclude<Security, 'none'>, readonly string[]> = {
  apiKey: ['apiKey', 'apiKeyHeader'],
  admin: ['admin'],
  session: ['session'],
}

const RATE_LIMIT_HEADERS: Record<string, string> = {
  'x-ratelimit-limit-requests': 'Requests allowed per window (a minute).',
  'x-ratelimit-remaining-requests': 'Requests left in the current window.',
  'x-ratelimit-reset-requests': 'Time until the request limit is back to full, e.g. `1s`, `6m0s`.',
  'x-ratelimit-limit-tokens': 'Tokens allowed per window.',
  'x-ratelimit-remaining-tokens': 'Tokens left in the current window.',
  'x-ratelimit-reset-tokens': 'Time until the token limit is back to full.',
}

const RETRY_HEADERS: Record<string, string> = {
  'retry-after': 'Whole seconds until the refusing window ends.',
  'retry-after-ms': 'The same in milliseconds.',
}

/** The refusals each kind of caller can meet, beyond a route's own answers. */
const REFUSALS: Record<Security, Record<string, string>> = {
  apiKey: {
    400: 'The body or the query is invalid (`param` names the field).',
    401: 'No API key, or one that is unknown, expired or revoked.',
    403: 'The key may not use this endpoint or model.',
    404: "No such object, or not one of the caller's (another owner's objects do not exist for you).",
    429: 'Over a limit of the key (requests or tokens per minute, or its quota).',
  },
  admin: {
    400: 'The body or the query is invalid (`param` names the field).',
    401: 'No admin token, or a wrong one.',
    404: 'No such object.',
  },
  session: { 401: 'No session, or an expired one.' },
  none: {},
}

const pascal = (id: string): string => id.charAt(0).toUpperCase() + id.slice(1)

/** Drops what zod adds to every converted schema and what says nothing (safe-integer bounds). */
function tidy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidy)
  if (typeof value !== 'object' || value === null) return value
  const out: Json = {}
  for (const [key, child] of Object.entries(value)) {
    if (key === '$schema' || key === '$id') continue
    if ((key === 'maximum' && child === SAFE_INT) || (key === 'minimum' && child === -SAFE_INT)) continue
    out[key] = tidy(child)
  }
  return out
}

export function buildDocument(
  operations: readonly OperationDoc[],
  named: Readonly<Record<string, z.ZodType>>,
  info: DocumentInfo,
  groups: TagGroups,
): OpenApiDocument {
  const registry = z.registry<{ id: string }>()
  const ids = new Map<z.ZodType, string>()
  const nameOf = (schema: z.ZodType, id: string): string => {
    const known = ids.get(schema)
    if (known !== undefined) return known
    if ([...ids.values()].includes(id)) throw new Error(`two schemas are named ${id}`)
    registry.add(schema, { id })
    ids.set(schema, id)
    return id
  }
  const ref = (id: string): Json => ({ $ref: `#/components/schemas/${id}` })
  for (const [id, schema] of Object.entries({ Error: ErrorBody, ErrorDetail: DetailBody, ...named })) nameOf(schema, id)

  const seen = new Set<string>()
  const paths: Record<string, Record<string, Json>> = {}
  for (const op of operations) {
    if (seen.has(op.operationId)) throw new Error(`two operations are called ${op.operationId}`)
    seen.add(op.operationId)
    const item = (paths[op.path] ??= {})
    if (item[op.method] !== undefined) throw new Error(`${op.method.toUpperCase()} ${op.path} is documented twice`)
    item[op.method] = operationObject(op, (schema, suffix) => ref(nameOf(schema, `${pascal(op.operationId)}${suffix}`)))
  }

  const converted = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'input',
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  })
  const usedSecurity = new Set(operations.flatMap((op) => (op.security === 'none' ? [] : SCHEMES_OF[op.security])))
  const tags = [...new Set(operations.map((op) => op.tag))]
  for (const tag of tags) {
    if (!groups.some((g) => g.tags.includes(tag))) throw new Error(`tag ${tag} is in no tag group`)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: info.title,
      version: info.version,
      description: info.description,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    tags: tags.map((name) => ({ name })),
    'x-tagGroups': groups
      .map((g) => ({ name: g.name, tags: g.tags.filter((t) => tags.includes(t)) }))
      .filter((g) => g.tags.length > 0),
    paths,
    components: {
      schemas: tidy(converted.schemas) as Record<string, unknown>,
      securitySchemes: Object.fromEntries([...usedSecurity].map((s) => [s, SECURITY_SCHEMES[s]])),
      headers: Object.fromEntries(
        Object.entries({ ...RATE_LIMIT_HEADERS, ...RETRY_HEADERS }).map(([name, description]) => [
          name,
          { description, schema: { type: 'string' } },
        ]),
      ),
    },
  }
}

type Ref = (schema: z.ZodType, suffix: string) => Json

function operationObject(op: OperationDoc, ref: Ref): Json {
  const parameters: Json[] = []
  for (const name of op.path.match(/\{[^}]+\}/g) ?? []) {
    const bare = name.slice(1, -1)
    parameters.push({
      name: bare,
      in: 'path',
      required: true,
      description: op.pathParams?.[bare] ?? `The ${bare.replaceAll('_', ' ')}.`,
      schema: { type: 'string' },
    })
  }
  if (op.query !== undefined) parameters.push(...queryParameters(op.query))
  const headers = op.rateLimited === true ? headerRefs(Object.keys(RATE_LIMIT_HEADERS)) : undefined
  const responses: Json = {}
  for (const [status, doc] of Object.entries(op.responses))
    responses[status] = responseObject(doc, ref, status, headers)
  for (const [status, description] of Object.entries(REFUSALS[op.security])) {
    if (responses[status] !== undefined) continue
    const refusalHeaders =
      status === '429' ? headerRefs([...Object.keys(RATE_LIMIT_HEADERS), ...Object.keys(RETRY_HEADERS)]) : undefined
    responses[status] = {
      description,
      ...(refusalHeaders === undefined ? {} : { headers: refusalHeaders }),
      // The RAG gateway's side answers as FastAPI does; everything else as OpenAI does.
      content: {
        'application/json': {
          schema: { $ref: `#/components/schemas/${op.security === 'session' ? 'ErrorDetail' : 'Error'}` },
        },
      },
    }
  }
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description === undefined ? {} : { description: op.description }),
    tags: [op.tag],
    security: op.security === 'none' ? [] : SCHEMES_OF[op.security].map((scheme) => ({ [scheme]: [] })),
    ...(parameters.length === 0 ? {} : { parameters }),
    ...(op.body === undefined
      ? {}
      : {
          requestBody: {
            required: op.body.optional !== true,
            content: { [op.body.contentType]: { schema: ref(op.body.schema, 'Request') } },
          },
        }),
    responses,
  }
}

function headerRefs(names: readonly string[]): Json {
  return Object.fromEntries(names.map((name) => [name, { $ref: `#/components/headers/${name}` }]))
}

function responseObject(doc: ResponseDoc, ref: Ref, status: string, headers: Json | undefined): Json {
  const content: Json = {}
  if (doc.schema !== undefined)
    content[doc.contentType ?? 'application/json'] = {
      schema: ref(doc.schema, status === '200' ? 'Response' : `Response${status}`),
    }
  else if (doc.contentType !== undefined) content[doc.contentType] = {}
  if (doc.streams === true) {
    content['text/event-stream'] = {
      schema: { type: 'string', description: 'Server-sent events, ended by `data: [DONE]` where OpenAI ends them so.' },
    }
  }
  return {
    description: doc.description,
    ...(headers === undefined ? {} : { headers }),
    ...(Object.keys(content).length === 0 ? {} : { content }),
  }
}

/** An object schema of query strings, one parameter per property. */
function queryParameters(query: z.ZodType): Json[] {
  const schema = tidy(z.toJSONSchema(query, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' })) as Json
  const properties = (schema.properties ?? {}) as Record<string, Json>
  const required = new Set((schema.required ?? []) as string[])
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property
    return {
      name,
      in: 'query',
      required: required.has(name),
      ...(typeof description === 'string' ? { description } : {}),
      schema: rest,
    }
  })
}
