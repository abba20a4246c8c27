// The gateway's OpenAPI document: valid OpenAPI 3.1 by a real validator, every schema in it
// valid JSON Schema 2020-12, every route the router serves documented and every documented
// path served (compared with the router's own list, so routes added later are caught),
// the same document from /openapi.json and from `tollgate openapi`, and its schemas the
// very ones the gateway validates with.
import { execFile } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import t from 'tap'
import { loadConfig } from '../../src/config/load.ts'
import { startGateway, type Gateway } from '../../src/main.ts'
import { apiDocument } from '../../src/openapi/catalogue.ts'
import { createLogger } from '../../src/observability/logger.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const document = apiDocument()

type Operation = {
  operationId: string
  parameters?: Array<{ name: string; in: string }>
  requestBody?: unknown
  responses: Record<string, unknown>
}

t.test('the document is valid OpenAPI 3.1, and its $refs resolve', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(structuredClone(document))
  t.ok(result.valid, JSON.stringify(result.errors ?? [], null, 1).slice(0, 2000))
  t.equal(validator.version, '3.1')
  t.doesNotThrow(() => validator.resolveRefs(), 'every $ref points at something')
  t.equal(document.openapi, '3.1.0')
})

t.test("every schema in it is valid JSON Schema 2020-12 (OpenAPI 3.1's dialect)", async (t) => {
  const ajv = new Ajv2020({ strict: false, validateFormats: false })
  for (const [name, schema] of Object.entries(document.components.schemas)) {
    t.ok(ajv.validateSchema(schema as object), `${name}: ${ajv.errorsText(ajv.errors)}`)
  }
  // And they compile together, cross-references included.
  const whole = { $id: 'https://tollgate.invalid/openapi.json', components: document.components }
  ajv.addSchema(whole)
  const searchRequest = ajv.getSchema(
    'https://tollgate.invalid/openapi.json#/components/schemas/SearchVectorStoreRequest',
  )
  t.ok(searchRequest, 'the search request compiles')
  t.ok(
    searchRequest?.({
      query: 'x',
      max_num_results: 5,
      filters: { type: 'and', filters: [{ type: 'eq', key: 'a', value: 1 }] },
    }),
    'a valid search, recursive filter included',
  )
  t.notOk(searchRequest?.({ query: 'x', max_num_results: 51 }), 'the document refuses what the gateway refuses')
})

t.test('the schemas are the ones requests are validated with', async (t) => {
  const schemas = document.components.schemas as Record<
    string,
    { properties?: Record<string, Record<string, unknown>>; required?: string[]; additionalProperties?: unknown }
  >
  t.same([...(schemas.CreateChatCompletionRequest?.required ?? [])].sort(), ['messages', 'model'])
  t.equal(schemas.SearchVectorStoreRequest?.properties?.max_num_results?.maximum, 50)
  t.same(schemas.CreateVectorStoreFileRequest?.required, ['file_id'])
  t.same(schemas.CreateKeyRequest?.additionalProperties, false, "the admin's strict body")
  t.equal(schemas.CreateFileRequest?.properties?.file?.format, 'binary', 'a multipart file part is binary')
  const paths = document.paths as Record<string, Record<string, Operation>>
  const list = paths['/v1/vector_stores']?.get
  t.same(
    list?.parameters?.map((p) => p.name).sort(),
    ['after', 'before', 'limit', 'order'],
    'list queries as parameters',
  )
  t.ok(paths['/v2/chat/completions']?.post?.responses['429'], 'refusals added')
  t.same(Object.keys(document.components.securitySchemes as object).sort(), [
    'admin',
    'apiKey',
    'apiKeyHeader',
    'session',
  ])
})

/** `GET /v1/vector_stores/:vector_store_id` and `get /v1/vector_stores/{vector_store_id}` alike. */
function normal(method: string, path: string): string {
  return `${method.toUpperCase()} ${path.replace(/:[A-Za-z_]+|\{[^}]+\}|\*$/g, '{}')}`
}

t.test('every route the router serves is in the document, and every documented path is served', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'))
  const config = loadConfig({
    path: join(ROOT, 'config/default.yaml'),
    env: {
      TOLLGATE_DATA_DIR: dataDir,
      PORT: '0',
      METRICS_PORT: '0',
      TOLLGATE_ADMIN_TOKEN: 'adm_openapi_test_token_123456abcdef',
    },
  })
  const gateway: Gateway = await startGateway(config, createLogger('silent'))
  t.teardown(() => gateway.shutdown())

  const served = new Set(gateway.app.routes().map((r) => normal(r.method, r.path)))
  const documented = new Set<string>()
  for (const [path, item] of Object.entries(document.paths)) {
    for (const method of Object.keys(item)) documented.add(normal(method, path))
  }
  const undocumented = [...served].filter((r) => !documented.has(r))
  const unserved = [...documented].filter((r) => !served.has(r))
  t.same(undocumented, [], 'served but not in the document')
  t.same(unserved, [], 'in the document but not served')
  t.ok(served.size >= 50, `${served.size} routes`)

  // Path parameters carry the router's names.
  for (const route of gateway.app.routes()) {
    if (route.path.endsWith('*')) continue
    const template = route.path.replace(/:([A-Za-z_]+)/g, '{$1}')
    t.ok(
      document.paths[template]?.[route.method.toLowerCase()],
      `${route.method} ${template} under its own parameter names`,
    )
  }

  // And what is served at /openapi.json is this document.
  const res = await fetch(`${gateway.url}/openapi.json`)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^application\/json/)
  t.same(await res.json(), JSON.parse(JSON.stringify(document)))
  const etag = res.headers.get('etag') ?? ''
  t.ok(etag)
  t.equal(
    (await fetch(`${gateway.url}/openapi.json`, { headers: { 'if-none-match': etag } })).status,
    304,
    'revalidated by its ETag',
  )
})

t.test('with portal.enabled false, /portal is neither served nor documented', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-openapi-'))
  const config = loadConfig({
    path: join(ROOT, 'config/default.yaml'),
    env: {
      TOLLGATE_DATA_DIR: dataDir,
      PORT: '0',
      METRICS_PORT: '0',
      TOLLGATE_ADMIN_TOKEN: 'adm_openapi_test_token_123456abcdef',
    },
  })
  const gateway: Gateway = await startGateway(
    { ...config, portal: { ...config.portal, enabled: false } },
    createLogger('silent'),
  )
  t.teardown(() => gateway.shutdown())
  t.notOk(
    gateway.app.routes().some((r) => r.path.startsWith('/portal')),
    'no /portal route',
  )
  t.equal((await fetch(`${gateway.url}/portal`)).status, 404)
  const served = (await (await fetch(`${gateway.url}/openapi.json`)).json()) as typeof document
  t.same(
    Object.keys(served.paths).filter((p) => p.startsWith('/portal')),
    [],
    'and none in /openapi.json',
  )
  t.ok(
    Object.keys(document.paths).some((p) => p.startsWith('/portal')),
    'which has them when the portal is on',
  )
  t.ok(Object.keys(served.paths).length > 40, 'the rest is still there')
})

t.test('`tollgate openapi` prints the same document', async (t) => {
  const stdout = await new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      [join(ROOT, 'src/cli.ts'), 'openapi'],
      { env: { PATH: process.env.PATH ?? '' }, maxBuffer: 16 << 20, timeout: 30_000 },
      (error, out) => (error ? fail(error) : done(out)),
    )
  })
  t.same(JSON.parse(stdout), JSON.parse(JSON.stringify(document)))
})
