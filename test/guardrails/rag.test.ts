// Guardrails on the RAG gateway's chat prompts, on a running gateway in front of a
// recording query-pipeline backend: under `guardrails.rag`, a prompt with a blocked match
// is refused in FastAPI's shape ({"detail"}) naming the check and the member, never the
// text, and the backend gets nothing; a masked one reaches it masked (its other members as
// they were); a clean one passes as the bytes it came in; the audit log names the user;
// other RAG routes are not read; a prompt that never arrives in full is cut at the body's pace.
import { connect } from 'node:net'
import t from 'tap'
import { ResponseReader } from '../helpers/http-reader.ts'
import { pollUntil } from '../helpers/poll.ts'
import { serveBackend, startRagHarness } from '../rag/harness.ts'

const CARD = '4111 1111 1111 1111'
const EMAIL = 'erika.mustermann@example.de'

const received: Array<{ url: string; body: string }> = []
const base = await serveBackend(t, (req, res) => {
  let body = ''
  req.setEncoding('utf8')
  req.on('data', (chunk: string) => (body += chunk))
  req.on('end', () => {
    received.push({ url: req.url ?? '', body })
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"answer":"ok"}')
  })
})
const h = await startRagHarness(t, {
  config: (doc) => {
    const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
    rag.services['query-pipeline'] = { baseUrl: base }
    rag.services['chat-session-manager'] = { baseUrl: base }
    Object.assign(doc.server as Record<string, unknown>, { bodyRateWindowMs: 300 })
    doc.guardrails = { policies: { gdpr: { detectors: { card: 'block', email: 'mask' } } }, rag: 'gdpr' }
  },
})
const headers = { ...(await h.auth()), 'content-type': 'application/json' }
const post = (path: string, body: unknown): Promise<Response> =>
  fetch(`${h.url}${path}`, { method: 'POST', headers, body: JSON.stringify(body) })

t.test('a blocked prompt is refused before the backend, in FastAPI shape', async (t) => {
  const before = received.length
  const res = await post('/query-pipelines/api/v1/chat', { sessionId: 's1', userPrompt: `charge ${CARD}` })
  t.equal(res.status, 400)
  const body = (await res.json()) as { detail: string }
  t.match(body.detail, /guardrail policy 'gdpr': its 'card' check matched at userPrompt/)
  t.notOk(body.detail.includes('4111'))
  const query = await post('/query-pipeline/api/v1/query', { query: `card ${CARD}` })
  t.equal(query.status, 400, 'the /query spelling too')
  t.equal(received.length, before, 'nothing reached the backend')
})

t.test('a masked prompt reaches the backend masked; a clean one as it came', async (t) => {
  const before = received.length
  const res = await post('/query-pipelines/api/v1/chat', {
    sessionId: 's1',
    userPrompt: `mail ${EMAIL}`,
    stream: false,
  })
  t.equal(res.status, 200)
  const sent = JSON.parse(received[before]!.body) as Record<string, unknown>
  t.same(sent, { sessionId: 's1', userPrompt: 'mail [EMAIL_1]', stream: false })
  const raw = '{"userPrompt":  "plain question"}'
  await fetch(`${h.url}/query-pipelines/api/v1/chat`, { method: 'POST', headers, body: raw })
  t.equal(received.at(-1)?.body, raw, 'unchanged bytes when nothing matched')
})

t.test('recorded with the user as the actor; other routes are not read', async (t) => {
  const admin = { authorization: 'Bearer adm_rag_test_token_1234567890abcdef' }
  const { value: page } = await pollUntil(
    async () =>
      (await (await fetch(`${h.url}/admin/audit?action=guardrail.block&limit=10`, { headers: admin })).json()) as {
        data: Array<Record<string, unknown>>
      },
    (p) => p.data.length > 0,
  )
  t.match(page.data[0], {
    actor: { type: 'user', name: 'Ada' },
    object_type: 'rag_prompt',
    after: { policy: 'gdpr', action: 'block', findings: [{ detector: 'card', action: 'block' }] },
  })
  t.notOk(JSON.stringify(page).includes('4111'))
  const before = received.length
  const other = await post('/chat-session-manager/api/v1/sessions/', { title: `card ${CARD}` })
  t.equal(other.status, 200, 'a session title is not a prompt')
  t.equal(received.length, before + 1)
})

t.test('a prompt body that stops short of its declared length is cut at the body pace (408), not held', async (t) => {
  const before = received.length
  const socket = connect({ port: Number(new URL(h.url).port), host: '127.0.0.1' })
  t.teardown(() => socket.destroy())
  const reader = new ResponseReader(socket)
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`)
  socket.write(
    [
      'POST /query-pipelines/api/v1/chat HTTP/1.1',
      'Host: x',
      ...lines,
      'Content-Length: 1000',
      '',
      '{"userPrompt":',
    ].join('\r\n'),
  )
  const res = await reader.next()
  t.equal(res?.status, 408)
  t.match(JSON.parse(res?.body.toString('utf8') ?? '{}'), { detail: /too slowly/ }, "FastAPI's shape")
  t.equal(received.length, before, 'nothing reached the backend')
})
