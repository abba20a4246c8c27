// What a route contributes to the gateway's OpenAPI document: one OperationDoc per method
// and path, with the zod schemas (src/api/, the admin's, ...) that validate its request.
// Each route module exports its own list; catalogue.ts gathers them.
import type { z } from 'zod'

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete'

/**
 * Who may call: an API key (`/v2`, `/v1`, `/queue`), the admin token (`/admin`), a RAG
 * session token, or anyone.
 */
export type Security = 'apiKey' | 'admin' | 'session' | 'none'

export interface ResponseDoc {
  readonly description: string
  readonly schema?: z.ZodType
  /** application/json when a schema is given and this is not. */
  readonly contentType?: string
  /** The call may also answer with server-sent events (`stream: true`). */
  readonly streams?: boolean
}

export interface BodyDoc {
  readonly contentType: 'application/json' | 'multipart/form-data'
  readonly schema: z.ZodType
  /** The body may be left out (rotate's is). */
  readonly optional?: boolean
}

export interface OperationDoc {
  readonly method: HttpMethod
  /** An OpenAPI path template: /v1/vector_stores/{vector_store_id}. */
  readonly path: string
  readonly operationId: string
  readonly summary: string
  readonly description?: string
  readonly tag: string
  readonly security: Security
  /** Descriptions of the path's parameters, by name. */
  readonly pathParams?: Readonly<Record<string, string>>
  /** Query parameters, as an object schema of strings. */
  readonly query?: z.ZodType
  readonly body?: BodyDoc
  /** The success replies by status ("200", "201"); the refusals are added from `security`. */
  readonly responses: Readonly<Record<string, ResponseDoc>>
  /** Replies carry the x-ratelimit-* headers of the key. */
  readonly rateLimited?: boolean
}

/** find-my-way's route syntax as an OpenAPI template: `:id` → `{id}`; a wildcard takes `wildcard`'s name. */
export function templateOf(route: string, wildcard = 'path'): string {
  return route.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}').replace(/\*$/, `{${wildcard}}`)
}
