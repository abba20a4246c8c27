// The RAG mock answers a JSON body nested too deep to echo back with a 422, not a 500: the
// fuzz once sent an ingestion task whose metadata was an array nested 100,000 deep, which
// JSON.parse takes and JSON.stringify (recursive) cannot write back.
import { request } from 'node:http'
import t from 'tap'
import { readText } from '../helpers/http.ts'
import { startMockProcess } from './harness.ts'

function postTask(url: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = request(
      `${url}/api/v1/task`,
      { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      readText(done),
    )
    req.once('error', fail)
    req.end(body)
  })
}

const task = (metadata: string): string => `{"filePath":"kb/notes.txt","role":"kb","metadata":{"tags":${metadata}}}`
const nested = (depth: number): string => '['.repeat(depth) + '1' + ']'.repeat(depth)

t.test('an ingestion task nested too deep: 422; one nested a little: queued', async (t) => {
  const mock = await startMockProcess(t, 'ingest-master', ['--status-step-ms', '0'])
  const deep = await postTask(mock.url, task(nested(100_000)))
  t.equal(deep.status, 422, 'nested 100,000 deep: refused')
  t.match(JSON.parse(deep.body), { detail: /required/ })
  const shallow = await postTask(mock.url, task(nested(8)))
  t.equal(shallow.status, 202, 'nested 8 deep: queued, and the process is alive')
  t.match(JSON.parse(shallow.body), { filePath: 'kb/notes.txt', status: String })
})

t.test('a path segment with malformed percent-encoding: 404, not a 500', async (t) => {
  const mock = await startMockProcess(t, 'config-manager', ['--status-step-ms', '0'])
  const reply = await new Promise<{ status: number; body: string }>((done, fail) => {
    request(`${mock.url}/api/v1/configurations/%zz`, readText(done)).once('error', fail).end()
  })
  t.equal(reply.status, 404)
  t.same(JSON.parse(reply.body), { detail: 'Not Found' })
})
