// Streams pass through the RAG gateway as they flow, proven without timing: a backend
// that holds its second event until the client has read the first, and an upload whose
// client holds its second part until the backend has received the first. A gateway that
// buffered either would never get past the first part (each wait is bounded).
import { createHash } from 'node:crypto'
import { request } from 'node:http'
import t from 'tap'
import { serveBackend, startRagHarness } from './harness.ts'
import { readText } from '../helpers/http.ts'

async function until(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((done) => setTimeout(done, 10))
  }
}

t.test('SSE and uploads stream through without buffering', async (t) => {
  let releaseSecondEvent = (): void => undefined
  let uploadBytes = 0
  const base = await serveBackend(t, (req, res) => {
    if (req.url?.startsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write('event: token\ndata: {"token":"first"}\n\n')
      releaseSecondEvent = () => res.end('event: token\ndata: {"token":"second"}\n\nevent: done\ndata: {}\n\n')
      return
    }
    const hash = createHash('sha256')
    uploadBytes = 0
    req.on('data', (chunk: Buffer) => {
      uploadBytes += chunk.length
      hash.update(chunk)
    })
    req.on('end', () => {
      const body = JSON.stringify({
        received: uploadBytes,
        sha256: hash.digest('hex'),
        chunked: req.headers['transfer-encoding'] === 'chunked',
      })
      // Hop-by-hop headers of the backend's hop, and one its Connection names, stay there.
      res
        .writeHead(200, {
          'content-type': 'application/json',
          connection: 'keep-alive, x-hop',
          'x-hop': 'backend',
          'keep-alive': 'timeout=5',
          'x-end-to-end': 'kept',
        })
        .end(body)
    })
  })
  const h = await startRagHarness(t, {
    config: (doc) => {
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['query-pipeline'] = { baseUrl: base }
      rag.services['file-manager'] = { baseUrl: base }
    },
  })
  const headers = await h.auth()

  t.test('an SSE event reaches the client before the backend sends the next', async (t) => {
    const res = await fetch(`${h.url}/query-pipelines/stream`, { method: 'POST', headers })
    t.equal(res.status, 200)
    const reader = res.body?.getReader()
    if (reader === undefined) throw new Error('no body')
    const first = new TextDecoder().decode((await reader.read()).value)
    t.match(first, /"first"/, 'the first event arrived while the backend still held the second')
    t.notMatch(first, /second/)
    releaseSecondEvent()
    let rest = ''
    for (let i = 0; i < 1000; i++) {
      const { done, value } = await reader.read()
      if (done) break
      rest += new TextDecoder().decode(value)
    }
    t.match(rest, /"second"[\s\S]*event: done/, 'then the rest')
  })

  t.test('an upload reaches the backend while the client is still sending it', async (t) => {
    const part = Buffer.alloc(1 << 20, 7)
    const total = 48 * part.length
    const hash = createHash('sha256')
    const reply = await new Promise<{
      status: number
      body: string
      headers: Record<string, string | string[] | undefined>
    }>((done, fail) => {
      const req = request(
        `${h.url}/file-manager/api/v1/files/upload`,
        { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream' } },
        readText(done),
      )
      req.once('error', fail)
      void (async () => {
        req.write(part)
        hash.update(part)
        // Held until the backend has the first part: a buffering gateway would never pass this.
        await until('the backend to receive the first MiB', () => uploadBytes >= part.length)
        t.pass('the backend had the first MiB before the client sent the second')
        for (let i = 1; i < 48; i++) {
          hash.update(part)
          if (!req.write(part)) await new Promise((drained) => req.once('drain', drained))
        }
        req.end()
      })().catch(fail)
    })
    t.equal(reply.status, 200)
    t.notOk('x-hop' in reply.headers, "a header the backend's Connection named is dropped")
    t.not(reply.headers['keep-alive'], 'timeout=5', "the backend's Keep-Alive is its own")
    t.equal(reply.headers['x-end-to-end'], 'kept')
    const body = JSON.parse(reply.body) as { received: number; sha256: string; chunked: boolean }
    t.equal(body.received, total, `${total} bytes`)
    t.equal(body.sha256, hash.digest('hex'), 'intact')
    t.equal(body.chunked, true, 'a chunked upload stays chunked')
  })
})

t.test('a large multipart upload to the built-in file-manager mock', async (t) => {
  const h = await startRagHarness(t)
  const headers = await h.auth()
  const size = 24 << 20
  const form = new FormData()
  form.append('files', new Blob([Buffer.alloc(size, 1)]), 'big.bin')
  const res = await fetch(`${h.url}/file-manager/api/v1/files/upload`, { method: 'POST', headers, body: form })
  t.equal(res.status, 200)
  // A list of files, as the provider's Local KB Guide reads it (before issue 27: {"files": [...]}).
  const files = (await res.json()) as Array<{ status: string; size: number }>
  t.same(
    files.map((f) => [f.status, f.size]),
    [['uploaded', size]],
  )
})
