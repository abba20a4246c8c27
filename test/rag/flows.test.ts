// The RAG gateway end to end: list sessions, stream a chat through query-pipelines, upload
// files to file-manager, ingest them; once against the built-in mock (what the default
// configuration serves), once against mock backends running as processes of their own.
import t, { type Test } from 'tap'
import { ragFlow, type Caller } from './flow.ts'
import { startMockProcess, startRagHarness, type RagHarness } from './harness.ts'

const GRACE = { sub: 'user-7', name: 'Grace Hopper', roles: ['user', 'editor'], groups: ['research'], tenant: 'acme' }
const GRACE_SEEN: Caller = {
  userId: 'user-7',
  username: 'Grace%20Hopper',
  roles: 'user,editor',
  groups: 'research',
  tenant: 'acme',
}

async function flow(t: Test, h: RagHarness): Promise<void> {
  await ragFlow(t, h.url, await h.auth(GRACE), GRACE_SEEN)
}

t.test('against the built-in mock (the default configuration)', async (t) => {
  // 40 ms between tokens: about 0.7 s for the answer, so it cannot arrive as one read.
  const h = await startRagHarness(t, {
    config: (doc) => {
      ;(doc.rag as Record<string, unknown>).mock = { tokenDelayMs: 40 }
    },
  })
  await flow(t, h)
})

t.test('against mock backends running as separate processes', async (t) => {
  const services = ['chat-session-manager', 'query-pipeline', 'file-manager', 'ingest-master'] as const
  const processes = await Promise.all(
    services.map((s) => startMockProcess(t, s, s === 'query-pipeline' ? ['--token-delay-ms', '40'] : [])),
  )
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      services.forEach((s, i) => {
        rag.services[s] = { ...rag.services[s], baseUrl: processes[i]?.url }
      })
    },
  })
  t.equal(h.gateway.app.routes().length > 0, true)
  await flow(t, h)
})
