// The runtime snapshot (src/runtime/snapshot.ts): a reload swaps it whole; a call captures
// the one in force when it starts and keeps it to its end. In process, on the embedded
// store and the built-in mock: a stream in flight across a reload keeps its tier's limits
// and its adapter (which the reload replaced: the old one is closed only once the stream is
// done), while a call started after the reload gets the new ones. And which settings a
// reload may apply (config/live-settings.ts).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { readConfigFile } from '../../src/config/load.ts'
import { changedLiveSections, restartOnlyChanges } from '../../src/config/live-settings.ts'
import { startGateway } from '../../src/main.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { holdRuntime } from '../../src/runtime/snapshot.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const MODEL = 'gpt-oss-120b'

t.test('holdRuntime: swap puts the next snapshot in force and hands back the previous', async (t) => {
  const first = { n: 1 }
  const holder = holdRuntime(first)
  const captured = holder.current
  t.equal(holder.swap({ n: 2 }), first)
  t.same(holder.current, { n: 2 }, 'new readers get the next one')
  t.equal(captured, first, 'a reader that captured the first keeps it')
  t.ok(Object.getOwnPropertyDescriptor(holder, 'current')?.writable, 'current is a plain property (one load per read)')
})

function writeConfig(path: string, rpm: number, tokensPerSecond: number): void {
  const doc = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as Record<string, unknown>
  doc.plans = { defaultTier: 'Basic', tiers: { Basic: { default: { rpm } } } }
  ;(doc.backends as Record<string, Record<string, unknown>>).mock = { type: 'mock', tokensPerSecond }
  writeFileSync(path, stringify(doc))
}

t.test('a stream in flight across a reload finishes on the configuration it started with', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-snapshot-'))
  const path = join(dir, 'config.yaml')
  const env = {
    TOLLGATE_DATA_DIR: join(dir, 'data'),
    PORT: '0',
    METRICS_PORT: '0',
    TOLLGATE_ADMIN_TOKEN: 'adm_snapshot_test_token_0123456789abcdef',
  }
  writeConfig(path, 111, 40)
  const load = (): ReturnType<typeof readConfigFile> => readConfigFile({ path, env })
  const loaded = load()
  const gateway = await startGateway(loaded.config, createLogger('silent'), { load, loaded })
  t.teardown(() => gateway.shutdown())
  const created = await fetch(`${gateway.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${env.TOLLGATE_ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: '{}',
  })
  const { key } = (await created.json()) as { key: string }
  const chat = (stream: boolean): Promise<Response> =>
    fetch(`${gateway.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 40, stream }),
    })

  const before = gateway.runtime.current
  const oldAdapter = before.registry.model(MODEL)?.deployments[0]?.adapter
  // 40 tokens at 40 a second: the stream runs about a second.
  const streaming = await chat(true)
  t.equal(streaming.status, 200)
  t.equal(streaming.headers.get('x-ratelimit-limit-requests'), '111')
  const reader = streaming.body!.getReader()
  const first = await reader.read()
  t.notOk(first.done, 'the stream has begun')

  writeConfig(path, 222, 4000)
  const report = await gateway.reload()
  t.equal(report.outcome, 'applied')
  t.same(report.changed, ['plans', 'backends'])
  const after = gateway.runtime.current
  t.not(after, before, 'a new snapshot is in force')
  t.not(after.registry.model(MODEL)?.deployments[0]?.adapter, oldAdapter, 'with a new adapter for the changed backend')
  t.equal(before.config.plans.tiers.Basic?.default.rpm, 111, 'the previous snapshot is untouched')

  const next = await chat(false)
  t.equal(next.headers.get('x-ratelimit-limit-requests'), '222', 'a call started after the reload: the new rpm')
  t.equal(((await next.json()) as { object: string }).object, 'chat.completion')

  // The stream goes on to its end on the old adapter, which the reload has not closed under it.
  let text = new TextDecoder().decode(first.value)
  for (;;) {
    const chunk = await reader.read()
    if (chunk.done) break
    text += new TextDecoder().decode(chunk.value)
  }
  t.match(text, /data: \[DONE\]\s*$/, 'the stream in flight finished whole')
  t.match(text, /"finish_reason":"length"/, 'with all its 40 tokens')
})

t.test('the RAG services and their limits change with a reload', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-snapshot-rag-'))
  const path = join(dir, 'config.yaml')
  const env = { TOLLGATE_DATA_DIR: join(dir, 'data'), PORT: '0', METRICS_PORT: '0' }
  const write = (publicRpm: number, docsRoute: string): void => {
    const doc = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as {
      plans: string
      rag: { limits: { publicRpm: number }; services: Record<string, unknown> }
    }
    doc.plans = join(ROOT, 'config/plans.yaml')
    doc.rag.limits.publicRpm = publicRpm
    doc.rag.services['config-manager'] = { baseUrl: 'mock', publicRoutes: [{ method: 'GET', path: docsRoute }] }
    writeFileSync(path, stringify(doc))
  }
  write(300, '/openapi.json')
  const load = (): ReturnType<typeof readConfigFile> => readConfigFile({ path, env })
  const loaded = load()
  const gateway = await startGateway(loaded.config, createLogger('silent'), { load, loaded })
  t.teardown(() => gateway.shutdown())
  const spec = (): Promise<Response> => fetch(`${gateway.url}/config-manager/openapi.json`)
  const first = await spec()
  t.equal(first.status, 200, 'a public route')
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '300')
  await first.arrayBuffer()

  write(77, '/docs')
  t.equal((await gateway.reload()).outcome, 'applied')
  const second = await spec()
  t.equal(second.status, 401, 'no longer public: the new route rules')
  await second.arrayBuffer()
  const docs = await fetch(`${gateway.url}/config-manager/docs`)
  t.equal(docs.headers.get('x-ratelimit-limit-requests'), '77', 'the new public rpm')
  await docs.arrayBuffer()
})

t.test('which settings a reload applies, and which need a restart', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-live-settings-'))
  const path = join(dir, 'config.yaml')
  const base = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as Record<string, unknown>
  base.plans = join(ROOT, 'config/plans.yaml')
  // The default file, as the test edits it (the fields it touches exist in it).
  interface Doc {
    defaultMaxTokens: number
    rag: { limits: { userRpm: number }; mock: { tokenDelayMs: number } }
    models: Array<{ deployments: unknown[] }>
    server: { port: number }
    queue: unknown
    logging: unknown
  }
  const load = (change: (doc: Doc) => void): ReturnType<typeof readConfigFile>['config'] => {
    const doc = structuredClone(base)
    change(doc as unknown as Doc)
    writeFileSync(path, stringify(doc))
    return readConfigFile({ path, env: { PORT: '0' } }).config
  }
  const running = load(() => undefined)
  t.same(
    restartOnlyChanges(
      running,
      load(() => undefined),
    ),
    [],
    'the same file: nothing',
  )
  const live = load((doc) => {
    doc.defaultMaxTokens = 99
    doc.rag.limits.userRpm = 5
    doc.models[0]?.deployments.push({ backend: 'mock', weight: 2 })
  })
  t.same(restartOnlyChanges(running, live), [], 'live sections only: a reload applies them')
  t.same(changedLiveSections(running, live), ['models', 'defaultMaxTokens', 'rag'])
  const restart = load((doc) => {
    doc.server.port = 9999
    doc.queue = { maxWaitMs: 1000 }
    doc.rag.mock.tokenDelayMs = 1
    doc.logging = { level: 'debug' }
  })
  t.same(
    restartOnlyChanges(running, restart),
    ['queue.maxWaitMs', 'logging.level', 'rag.mock.tokenDelayMs'],
    'named by path; PORT from the environment wins over the file, as at boot, so server.port is no change',
  )
})
