// /v1 through the `openai` adapter: Tollgate in front of a separate OpenAI-compatible
// server process that implements files and vector stores. The same SDK tests as against
// the mock, and what reached the upstream.
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, startUpstream, type UpstreamProcess } from '../helpers/gateway.ts'
import { v1Subject, v1Tests, type V1Subject } from './v1-endpoints.ts'

const UPSTREAM_KEY = 'upstream-secret-for-v1'
let subject: V1Subject
let upstream: UpstreamProcess

t.before(async () => {
  upstream = await startUpstream(['--require-key', UPSTREAM_KEY])
  const gw = await startTollgate({
    config: (doc) => {
      doc.backends = {
        ...(doc.backends as object),
        up: { type: 'openai', baseUrl: `${upstream.url}/v1`, apiKeyEnv: 'UPSTREAM_KEY' },
      }
      doc.resourceBackend = 'up'
    },
    env: { UPSTREAM_KEY },
  })
  subject = await v1Subject(gw, 'v1-upstream')
})
t.teardown(async () => {
  await subject.gw.stop()
  await upstream.stop()
})

v1Tests(t, () => subject)

t.test("the upstream served /v1 with the gateway's key, never the client's", async (t) => {
  const seen = await upstream.requests()
  const paths = seen.map((r) => `${r.method} ${r.path.split('?')[0]}`)
  t.ok(
    paths.some((p) => /^POST \/v1\/vector_stores\/vs_[^/]+\/search$/.test(p)),
    'search forwarded',
  )
  t.ok(
    paths.some((p) => /^POST \/v1\/vector_stores\/vs_[^/]+\/file_batches$/.test(p)),
    'batches forwarded',
  )
  t.ok(seen.every((r) => r.headers.authorization === `Bearer ${UPSTREAM_KEY}`))
  t.notOk(JSON.stringify(seen).includes(subject.key))
})

t.test(
  "a list filtered by owner is filled from the upstream server's further pages, with the gateway's key",
  async (t) => {
    const mine = (await subject.gw.createKey({ owner: 'paging-owner', tier: 'Standard4000' })).key
    const other = (await subject.gw.createKey({ owner: 'paging-other', tier: 'Standard4000' })).key
    const mineClient = new OpenAI({ apiKey: mine, baseURL: `${subject.gw.url}/v1`, maxRetries: 0 })
    const otherClient = new OpenAI({ apiKey: other, baseURL: `${subject.gw.url}/v1`, maxRetries: 0 })
    const ids: string[] = []
    for (let i = 0; i < 2; i++) ids.unshift((await mineClient.vectorStores.create({ name: `paging ${i}` })).id)
    for (let i = 0; i < 4; i++) await otherClient.vectorStores.create({ name: `noise ${i}` })
    const before = (await upstream.requests()).length
    const seen: string[] = []
    for await (const store of mineClient.vectorStores.list({ limit: 1 })) seen.push(store.id)
    t.same(
      seen.filter((id) => ids.includes(id)),
      ids,
      "both of the owner's stores, newest first",
    )
    t.same(seen.filter((id) => !ids.includes(id)).length, 0, 'nothing of the other owner')
    const pages = (await upstream.requests()).slice(before).filter((r) => r.path.startsWith('/v1/vector_stores?'))
    t.ok(
      pages.some((r) => /[?&]after=vs_/.test(r.path)),
      'further pages were asked for with after=',
    )
    t.ok(
      pages.every((r) => r.headers.authorization === `Bearer ${UPSTREAM_KEY}`),
      "with the gateway's key",
    )
  },
)
