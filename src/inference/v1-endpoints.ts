// The /v1 endpoints: files (the very specs of /v2/files, so both prefixes share one store
// and one set of ownership records) and vector stores, in OpenAI's paths. They walk the
// same corridor as /v2; a vector store is owned like a file, and everything under it
// (its files, batches, search) is reached only by its owner. Files named in a body must
// be the caller's too: attaching someone else's file would make its text searchable.
import type { Params } from '../http/router.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec, type OwnedReference } from './endpoints.ts'

const enc = encodeURIComponent
const store = (p: Params): string => `/vector_stores/${enc(p.vector_store_id ?? '')}`
const under =
  (rest: (p: Params) => string) =>
  (p: Params): string =>
    `${store(p)}${rest(p)}`

/** Every call under /vector_stores/{vector_store_id} reaches the store first. */
const OF_STORE: OwnedReference = { kind: 'vector_store', param: 'vector_store_id' }
const STORE = { kind: 'vector_store', param: 'vector_store_id' } as const
const BATCH = { kind: 'vector_store.file_batch', param: 'batch_id' } as const

export const FILE_SPECS: readonly EndpointSpec[] = PROXIED_ENDPOINTS.filter((spec) =>
  spec.endpoint.startsWith('files.'),
)

export const VECTOR_STORE_ENDPOINTS: readonly EndpointSpec[] = [
  {
    endpoint: 'vector_stores.create',
    method: 'POST',
    route: '/vector_stores',
    body: 'json',
    resource: true,
    ownership: { kind: 'vector_store', action: 'create' },
    upstreamPath: () => '/vector_stores',
  },
  {
    endpoint: 'vector_stores.list',
    method: 'GET',
    route: '/vector_stores',
    body: 'none',
    resource: true,
    ownership: { kind: 'vector_store', action: 'list' },
    upstreamPath: () => '/vector_stores',
  },
  {
    endpoint: 'vector_stores.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: store,
  },
  {
    endpoint: 'vector_stores.update',
    method: 'POST',
    route: '/vector_stores/:vector_store_id',
    body: 'json',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: store,
  },
  {
    endpoint: 'vector_stores.delete',
    method: 'DELETE',
    route: '/vector_stores/:vector_store_id',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'delete' },
    upstreamPath: store,
  },
  {
    endpoint: 'vector_stores.search',
    method: 'POST',
    route: '/vector_stores/:vector_store_id/search',
    body: 'json',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under(() => '/search'),
  },

  {
    endpoint: 'vector_stores.files.create',
    method: 'POST',
    route: '/vector_stores/:vector_store_id/files',
    body: 'json',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under(() => '/files'),
  },
  {
    endpoint: 'vector_stores.files.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id/files',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under(() => '/files'),
  },
  {
    endpoint: 'vector_stores.files.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id/files/:file_id',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under((p) => `/files/${enc(p.file_id ?? '')}`),
  },
  {
    endpoint: 'vector_stores.files.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id/files/:file_id/content',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under((p) => `/files/${enc(p.file_id ?? '')}/content`),
  },
  {
    endpoint: 'vector_stores.files.update',
    method: 'POST',
    route: '/vector_stores/:vector_store_id/files/:file_id',
    body: 'json',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under((p) => `/files/${enc(p.file_id ?? '')}`),
  },
  {
    endpoint: 'vector_stores.files.delete',
    method: 'DELETE',
    route: '/vector_stores/:vector_store_id/files/:file_id',
    body: 'none',
    resource: true,
    ownership: { ...STORE, action: 'access' },
    upstreamPath: under((p) => `/files/${enc(p.file_id ?? '')}`),
  },

  {
    endpoint: 'vector_stores.file_batches.create',
    method: 'POST',
    route: '/vector_stores/:vector_store_id/file_batches',
    body: 'json',
    resource: true,
    ownership: { kind: 'vector_store.file_batch', action: 'create' },
    owns: [OF_STORE],
    upstreamPath: under(() => '/file_batches'),
  },
  {
    endpoint: 'vector_stores.file_batches.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id/file_batches/:batch_id',
    body: 'none',
    resource: true,
    ownership: { ...BATCH, action: 'access' },
    owns: [OF_STORE],
    upstreamPath: under((p) => `/file_batches/${enc(p.batch_id ?? '')}`),
  },
  {
    endpoint: 'vector_stores.file_batches.cancel',
    method: 'POST',
    route: '/vector_stores/:vector_store_id/file_batches/:batch_id/cancel',
    body: 'none',
    resource: true,
    ownership: { ...BATCH, action: 'access' },
    owns: [OF_STORE],
    upstreamPath: under((p) => `/file_batches/${enc(p.batch_id ?? '')}/cancel`),
  },
  {
    endpoint: 'vector_stores.file_batches.list',
    method: 'GET',
    route: '/vector_stores/:vector_store_id/file_batches/:batch_id/files',
    body: 'none',
    resource: true,
    ownership: { ...BATCH, action: 'access' },
    owns: [OF_STORE],
    upstreamPath: under((p) => `/file_batches/${enc(p.batch_id ?? '')}/files`),
  },
]

/** Everything served under /v1. */
export const V1_ENDPOINTS: readonly EndpointSpec[] = [...FILE_SPECS, ...VECTOR_STORE_ENDPOINTS]
