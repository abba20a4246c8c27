// The /v2 endpoints: what each reads, which model kind it takes, where it is sent and
// which owned objects it touches. The handler walks this table (and /v1's, in
// v1-endpoints.ts); nothing else knows paths.
import type { Endpoint, ModelKind } from '../config/schema.ts'
import type { Params } from '../http/router.ts'
import type { OwnedKind } from '../store/ports.ts'

export type BodyKind = 'json' | 'multipart' | 'none'

export type Ownership =
  /** Creates an object the caller will own (its id is in the reply). */
  | { readonly kind: OwnedKind; readonly action: 'create' }
  /** Lists objects: the reply is filtered to the caller's. */
  | { readonly kind: OwnedKind; readonly action: 'list' }
  /** Touches one object, named by a path parameter (`id` unless `param` says): the caller must own it. */
  | { readonly kind: OwnedKind; readonly action: 'access' | 'delete'; readonly param?: string }

/**
 * Another owned object a call reaches through its path (a file batch's vector store). Ids a
 * body names are found by the table in object-ids.ts, on every endpoint alike.
 */
export interface OwnedReference {
  readonly kind: OwnedKind
  readonly param: string
}

export interface EndpointSpec {
  readonly endpoint: Endpoint
  readonly method: 'GET' | 'POST' | 'DELETE'
  /** Route under the API prefix, find-my-way syntax. */
  readonly route: string
  readonly body: BodyKind
  /** Model kinds this endpoint accepts; absent means the call names no model. */
  readonly modelKinds?: readonly ModelKind[]
  /** Served by the resource backend (files, fine-tuning) rather than the model's deployments. */
  readonly resource?: boolean
  readonly ownership?: Ownership
  /** Owned objects the path reaches besides `ownership`'s: the caller must own each (checked first). */
  readonly owns?: readonly OwnedReference[]
  /**
   * The path parameter that names the model (an Azure-style deployment), in place of the
   * body's: see azure-endpoints.ts.
   */
  readonly modelParam?: string
  /** May stream when the body says `stream: true`. */
  readonly streams?: boolean
  /** Upstream path under the backend's API root. */
  upstreamPath(params: Params): string
}

const fixed = (path: string) => (): string => path
const withId =
  (before: string, after = '') =>
  (p: Params): string =>
    `${before}/${encodeURIComponent(p.id ?? '')}${after}`

export const PROXIED_ENDPOINTS: readonly EndpointSpec[] = [
  {
    endpoint: 'chat.completions',
    method: 'POST',
    route: '/chat/completions',
    body: 'json',
    modelKinds: ['chat'],
    streams: true,
    upstreamPath: fixed('/chat/completions'),
  },
  {
    endpoint: 'completions',
    method: 'POST',
    route: '/completions',
    body: 'json',
    modelKinds: ['chat'],
    streams: true,
    upstreamPath: fixed('/completions'),
  },
  {
    endpoint: 'responses',
    method: 'POST',
    route: '/responses',
    body: 'json',
    modelKinds: ['chat'],
    streams: true,
    upstreamPath: fixed('/responses'),
  },
  {
    endpoint: 'embeddings',
    method: 'POST',
    route: '/embeddings',
    body: 'json',
    modelKinds: ['embedding'],
    upstreamPath: fixed('/embeddings'),
  },
  {
    endpoint: 'audio.transcriptions',
    method: 'POST',
    route: '/audio/transcriptions',
    body: 'multipart',
    modelKinds: ['audio'],
    streams: true,
    upstreamPath: fixed('/audio/transcriptions'),
  },
  {
    endpoint: 'audio.translations',
    method: 'POST',
    route: '/audio/translations',
    body: 'multipart',
    modelKinds: ['audio'],
    upstreamPath: fixed('/audio/translations'),
  },
  {
    endpoint: 'images.generations',
    method: 'POST',
    route: '/images/generations',
    body: 'json',
    modelKinds: ['image'],
    upstreamPath: fixed('/images/generations'),
  },
  {
    endpoint: 'images.edits',
    method: 'POST',
    route: '/images/edits',
    body: 'multipart',
    modelKinds: ['image'],
    upstreamPath: fixed('/images/edits'),
  },
  // A job reads its files (training_file, validation_file): the body check finds them.
  {
    endpoint: 'fine_tuning.jobs.create',
    method: 'POST',
    route: '/fine_tuning/jobs',
    body: 'json',
    modelKinds: ['chat'],
    resource: true,
    ownership: { kind: 'fine_tuning.job', action: 'create' },
    upstreamPath: fixed('/fine_tuning/jobs'),
  },
  {
    endpoint: 'fine_tuning.jobs.list',
    method: 'GET',
    route: '/fine_tuning/jobs',
    body: 'none',
    resource: true,
    ownership: { kind: 'fine_tuning.job', action: 'list' },
    upstreamPath: fixed('/fine_tuning/jobs'),
  },
  {
    endpoint: 'fine_tuning.jobs.list',
    method: 'GET',
    route: '/fine_tuning/jobs/:id',
    body: 'none',
    resource: true,
    ownership: { kind: 'fine_tuning.job', action: 'access' },
    upstreamPath: withId('/fine_tuning/jobs'),
  },
  {
    endpoint: 'fine_tuning.jobs.cancel',
    method: 'POST',
    route: '/fine_tuning/jobs/:id/cancel',
    body: 'none',
    resource: true,
    ownership: { kind: 'fine_tuning.job', action: 'access' },
    upstreamPath: withId('/fine_tuning/jobs', '/cancel'),
  },
  {
    endpoint: 'fine_tuning.jobs.events',
    method: 'GET',
    route: '/fine_tuning/jobs/:id/events',
    body: 'none',
    resource: true,
    ownership: { kind: 'fine_tuning.job', action: 'access' },
    upstreamPath: withId('/fine_tuning/jobs', '/events'),
  },
  {
    endpoint: 'files.create',
    method: 'POST',
    route: '/files',
    body: 'multipart',
    resource: true,
    ownership: { kind: 'file', action: 'create' },
    upstreamPath: fixed('/files'),
  },
  {
    endpoint: 'files.list',
    method: 'GET',
    route: '/files',
    body: 'none',
    resource: true,
    ownership: { kind: 'file', action: 'list' },
    upstreamPath: fixed('/files'),
  },
  {
    endpoint: 'files.list',
    method: 'GET',
    route: '/files/:id',
    body: 'none',
    resource: true,
    ownership: { kind: 'file', action: 'access' },
    upstreamPath: withId('/files'),
  },
  // The provider's dataset check (its fine-tuning guide): reads one file, so only its owner's.
  {
    endpoint: 'files.validate',
    method: 'GET',
    route: '/files/validate/:id',
    body: 'none',
    resource: true,
    ownership: { kind: 'file', action: 'access' },
    upstreamPath: withId('/files/validate'),
  },
  {
    endpoint: 'files.content',
    method: 'GET',
    route: '/files/:id/content',
    body: 'none',
    resource: true,
    ownership: { kind: 'file', action: 'access' },
    upstreamPath: withId('/files', '/content'),
  },
  {
    endpoint: 'files.delete',
    method: 'DELETE',
    route: '/files/:id',
    body: 'none',
    resource: true,
    ownership: { kind: 'file', action: 'delete' },
    upstreamPath: withId('/files'),
  },
]
