// The RAG gateway as an operator runs it (tollgate serve, default configuration): public
// routes work end to end on the built-in mock, a token the gateway did not issue gets 401. A public upload route (configured) then shows a 256 MiB upload passing
// through the gateway process to a mock backend process without the gateway holding it.
import { request } from 'node:http'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { rssOf } from '../helpers/memory.ts'
import { startMockProcess } from './harness.ts'
import { readText } from '../helpers/http.ts'

t.test(
  'tollgate serve: public routes on the built-in mock, 401 for a foreign token, a large upload streamed',
  async (t) => {
    // Status step 0: the upload answers its final state at once.
    const fileManager = await startMockProcess(t, 'file-manager', [
      '--max-file-bytes',
      String(1 << 30),
      '--status-step-ms',
      '0',
    ])
    const gw = await startTollgate({
      config: (doc) => {
        const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
        rag.services['file-manager'] = {
          baseUrl: fileManager.url,
          publicRoutes: [
            { method: 'GET', path: '/redoc' },
            { method: 'POST', path: '/api/v1/files/upload' },
          ],
        }
      },
    })
    t.teardown(() => gw.stop())

    const redoc = await fetch(`${gw.url}/config-manager/redoc`)
    t.equal(redoc.status, 200)
    t.match(
      await redoc.text(),
      /Tollgate mock of config-manager/,
      'the built-in mock answers, in the default configuration',
    )
    const sessions = await fetch(`${gw.url}/chat-session-manager/api/v1/sessions/`, {
      headers: { authorization: 'Bearer anything' },
    })
    t.equal(sessions.status, 401, 'a token the gateway did not issue is refused')
    t.same(await sessions.json(), { detail: 'Could not validate credentials' })
    t.equal(sessions.headers.get('www-authenticate'), 'Bearer')

    const pid = gw.child.pid ?? 0
    const before = await rssOf(pid)
    let peak = before
    const sampler = setInterval(() => {
      void rssOf(pid).then(
        (rss) => {
          peak = Math.max(peak, rss)
        },
        () => undefined,
      )
    }, 25)
    const part = Buffer.alloc(1 << 20, 3)
    const parts = 256
    const boundary = 'tollgate-rag-boundary'
    const head = Buffer.from(
      `--${boundary}\r\ncontent-disposition: form-data; name="files"; filename="large.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`,
    )
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`)
    const reply = await new Promise<{ status: number; body: string }>((done, fail) => {
      const req = request(
        `${gw.url}/file-manager/api/v1/files/upload`,
        {
          method: 'POST',
          headers: {
            'content-type': `multipart/form-data; boundary=${boundary}`,
            'content-length': head.length + parts * part.length + tail.length,
          },
        },
        readText(done),
      )
      req.once('error', fail)
      void (async () => {
        req.write(head)
        for (let i = 0; i < parts; i++) if (!req.write(part)) await new Promise((drained) => req.once('drain', drained))
        req.end(tail)
      })()
    })
    clearInterval(sampler)
    t.equal(reply.status, 200)
    // A list of files, as the provider's Local KB Guide reads it (before issue 27: {"files": [...]}).
    const file = (JSON.parse(reply.body) as Array<{ status: string; size: number }>)[0]
    t.same([file?.status, file?.size], ['uploaded', parts * part.length], '256 MiB arrived whole')
    const grew = (peak - before) / (1 << 20)
    t.comment(
      `gateway RSS: ${(before / (1 << 20)).toFixed(0)} MiB before, peak ${(peak / (1 << 20)).toFixed(0)} MiB during a 256 MiB upload (+${grew.toFixed(0)} MiB)`,
    )
    t.ok(grew < 96, `the gateway's resident memory grew ${grew.toFixed(0)} MiB, far below the 256 MiB it relayed`)

    // The line is written once the reply has closed; the client may read it a moment before.
    const uploadLine = (): Record<string, unknown> | undefined =>
      gw.logs().find((l) => l.msg === 'request' && l.route === 'rag.file-manager' && l.method === 'POST')
    for (let i = 0; i < 500 && uploadLine() === undefined; i++) await new Promise((done) => setTimeout(done, 20))
    t.equal(uploadLine()?.status, 200, 'logged')
  },
)
