// Shapes shared across the public API, as zod schemas. The schemas in src/api/ are the one
// description of what a request may hold and what a reply looks like: the gateway and the
// mock validate requests with them, and the OpenAPI document (src/openapi/) is generated
// from them. Request schemas are loose where the gateway passes fields through untouched.
import { z } from 'zod'

/** The error body every refusal under /v2, /v1, /queue and /admin has (src/errors.ts). */
export const ErrorBody = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string().meta({
        description:
          'invalid_request_error, authentication_error, permission_error, requests, tokens, insufficient_quota, server_error',
      }),
      param: z.string().nullable().meta({ description: 'The parameter at fault, when there is one.' }),
      code: z.string().nullable().meta({ description: 'A stable code per cause (see src/errors.ts).' }),
    }),
    detail: z.string().meta({
      description:
        "The same message as `error.message`, where FastAPI-style clients (and the provider's own API) put it.",
    }),
  })
  .meta({
    description:
      "An error, in OpenAI's shape, with FastAPI's `detail` beside it: the OpenAI SDKs read `error`, code written for the provider's API reads `detail`. Upstream errors in OpenAI's shape are relayed with `detail` added.",
  })

/** FastAPI's error body, on the RAG gateway's side. */
export const DetailBody = z.object({ detail: z.string() }).meta({ description: "An error, in FastAPI's shape." })

/** Up to 16 string pairs kept on an object for the caller. */
export const Metadata = z
  .record(z.string().max(64), z.string().max(512))
  .refine((m) => Object.keys(m).length <= 16, 'at most 16 keys')
  .nullable()
  .meta({ description: 'Up to 16 key-value pairs: keys up to 64 characters, values up to 512.' })

/** The id of an object in a path, as a path parameter's schema. */
export const objectId = z.string().min(1).max(256)

/** Cursor pagination of OpenAI's lists: `after`/`before` are ids of objects seen. */
export const cursorQuery = {
  limit: z.coerce.number().int().min(1).max(100).optional().meta({ description: 'Page size, 1 to 100 (default 20).' }),
  order: z.enum(['asc', 'desc']).optional().meta({ description: 'By creation time; default desc.' }),
  after: z.string().max(256).optional().meta({ description: 'The id of the last object of the previous page.' }),
  before: z.string().max(256).optional().meta({ description: 'The id of the first object of the next page.' }),
}

/** A page of an OpenAI cursor list. */
export function listOf<T extends z.ZodType>(item: T) {
  return z.object({
    object: z.literal('list'),
    data: z.array(item),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  })
}

/** What a DELETE answers. */
export function deletedObject(object: string) {
  return z.object({ id: z.string(), object: z.literal(object), deleted: z.boolean() })
}

/**
 * A file part of a multipart/form-data body. Request validation sees each uploaded part as
 * this marker (the bytes are spooled to disk, not held); the document shows it as binary.
 */
export const UPLOADED_PART: unique symbol = Symbol('uploaded part')
export const filePart = z
  .custom<typeof UPLOADED_PART>((value) => value === UPLOADED_PART, { message: 'expected a file part' })
  .meta({ type: 'string', format: 'binary' })

/** The embedding tokens a call cost, where the backend reports them (an extension to OpenAI's objects). */
export const EmbeddingUsage = z
  .object({
    prompt_tokens: z.number().int().min(0),
    total_tokens: z.number().int().min(0),
  })
  .meta({
    description: "Tokens embedded for this call (Tollgate's mock reports them; metering charges them to the key).",
  })
