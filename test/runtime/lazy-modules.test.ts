// Memory at rest (issue 24): on the default configuration, what no request has used yet is
// not loaded: the RAG mock's services, the RAG gateway's corridor, the OpenAPI catalogue,
// jose (the first token read or signed). Each comes with its first use,
// which the test then makes, so the probe is seen to see them. The mock backend's handlers
// are loaded before the gateway listens when a model uses the mock (loading them during a
// call would hold every call in flight), and never when none does. The tokenizer is never
// loaded on the gateway's thread, not even by the mock's replies, which the tokenizer's
// worker counts; nor is undici, Node's fetch, which an ES import of node:http would load
// (src/http/node-http.ts), nor http-proxy-3 without an upstream backend. A gateway with the
// portal off never loads its routes and pages.
import t from 'tap'
import { startTollgate, startUpstream, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const PROBE = ['--import', new URL('../helpers/module-probe.ts', import.meta.url).pathname]

const LAZY = {
  ragMock: '/src/rag/mock/server.ts',
  ragCorridor: '/src/rag/handler.ts',
  catalogue: '/src/openapi/catalogue.ts',
  jose: '/node_modules/jose/',
} as const
const UPSTREAM = {
  proxy: '/node_modules/http-proxy-3/',
} as const
const PORTAL = {
  portalRoutes: '/src/portal/routes.ts',
  portalPages: '/src/portal/pages/',
} as const
const MOCK = {
  mockHandlers: '/src/backends/mock/handlers.ts',
} as const
const NEVER = {
  tokenizer: '/gpt-tokenizer/',
  undici: 'node-internal:NativeModule internal/deps/undici/undici',
} as const

/** The modules the gateway's main thread has loaded so far (test/helpers/module-probe.ts). */
async function loadedModules(gw: RunningTollgate): Promise<string[]> {
  const seen = gw.output().length
  gw.child.kill('SIGUSR2')
  const line = await pollUntil(
    async () =>
      gw
        .output()
        .slice(seen)
        .split('\n')
        .find((l) => l.startsWith('modules [') && l.endsWith(']')),
    (l) => l !== undefined,
  )
  if (line.value === undefined) throw new Error('the module probe wrote nothing')
  return JSON.parse(line.value.slice('modules '.length)) as string[]
}

const has = (modules: readonly string[], part: string): boolean => modules.some((url) => url.includes(part))

t.test('the default configuration loads the RAG mock and API reference on first use', async (t) => {
  const gw = await startTollgate({ execArgv: PROBE })
  t.teardown(() => gw.stop())
  const atRest = await loadedModules(gw)
  t.ok(has(atRest, '/src/app.ts'), 'the probe sees the gateway’s modules')
  for (const [what, part] of Object.entries(LAZY)) t.notOk(has(atRest, part), `${what}: not loaded at boot`)
  for (const [what, part] of Object.entries(MOCK))
    t.ok(has(atRest, part), `${what}: loaded before listening (the mock serves models)`)
  for (const [what, part] of Object.entries(NEVER)) t.notOk(has(atRest, part), `${what}: not loaded at boot`)
  for (const [what, part] of Object.entries(PORTAL)) t.ok(has(atRest, part), `${what}: loaded (the portal is on)`)

  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const reply = await sdkClient(gw, key).chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'hello' }],
  })
  t.match(reply.choices[0]?.message.content, /mock backend/, 'the mock answers its first call')
  const docs = await fetch(`${gw.url}/openapi.json`)
  t.equal(docs.status, 200)
  t.equal(((await docs.json()) as { openapi?: string }).openapi?.startsWith('3.1'), true, 'the document, built now')
  const rag = await fetch(`${gw.url}/config-manager/openapi.json`)
  t.equal(rag.status, 200, 'a public route of a RAG service on the mock')
  await rag.arrayBuffer()
  const token = await fetch(`${gw.url}/config-manager/configs`, { headers: { authorization: 'Bearer a.b.c' } })
  t.equal(token.status, 401, 'a RAG call with a token that is not one: jose read it')
  await token.arrayBuffer()

  const used = await loadedModules(gw)
  for (const [what, part] of Object.entries(LAZY)) t.ok(has(used, part), `${what}: loaded by its first use`)
  for (const [what, part] of Object.entries(NEVER))
    t.notOk(has(used, part), `${what}: still not loaded after those calls (the mock's reply counted by the worker)`)
  for (const [what, part] of Object.entries(UPSTREAM))
    t.notOk(has(used, part), `${what}: not loaded (no upstream backend)`)
})

t.test('a gateway whose models all go upstream never loads the mock backend or the tokenizer', async (t) => {
  const upstream = await startUpstream()
  t.teardown(() => upstream.stop())
  const gw = await startTollgate({
    execArgv: PROBE,
    config: (doc) => {
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: `${upstream.url}/v1` } }
      doc.resourceBackend = 'up'
      for (const model of doc.models as Array<{ deployments: unknown[] }>) model.deployments = [{ backend: 'up' }]
    },
  })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  const reply = await sdkClient(gw, key).chat.completions.create({
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'hello' }],
  })
  t.ok(reply.usage !== undefined, 'a call served by the upstream, which reported its usage')
  const used = await loadedModules(gw)
  t.ok(has(used, '/src/app.ts'), 'the probe sees the gateway’s modules')
  for (const [what, part] of Object.entries({ ...MOCK, ...NEVER })) t.notOk(has(used, part), `${what}: never loaded`)
  for (const [what, part] of Object.entries(UPSTREAM)) t.ok(has(used, part), `${what}: loaded (the models go upstream)`)
})

t.test('a gateway with the portal off never loads its routes or pages', async (t) => {
  const gw = await startTollgate({
    execArgv: PROBE,
    config: (doc) => {
      doc.portal = { ...(doc.portal as object), enabled: false }
    },
  })
  t.teardown(() => gw.stop())
  const page = await fetch(`${gw.url}/portal/sign-in`)
  t.equal(page.status, 404, 'no portal is served')
  await page.arrayBuffer()
  const used = await loadedModules(gw)
  t.ok(has(used, '/src/app.ts'), 'the probe sees the gateway’s modules')
  for (const [what, part] of Object.entries(PORTAL)) t.notOk(has(used, part), `${what}: never loaded`)
})
