// The RAG file-manager mock reads hostile uploads without dying. It runs in the gateway's
// process by default, so a stream error it does not hear ends the gateway: the fuzz once cut a
// form inside a part under another field than `files`, which the mock drops unread, and the
// dropped part's stream failed with nobody listening (busboy "Unexpected end of form").
import { request } from 'node:http'
import t from 'tap'
import { readText } from '../helpers/http.ts'
import { startMockProcess } from './harness.ts'

const BOUNDARY = 'tollgate-cut-form'

function upload(url: string, body: Buffer): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = request(
      `${url}/api/v1/files/upload`,
      {
        method: 'POST',
        headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': body.length },
      },
      readText(done),
    )
    req.once('error', fail)
    req.end(body)
  })
}

const part = (field: string, filename: string, data: string): string =>
  `--${BOUNDARY}\r\ncontent-disposition: form-data; name="${field}"; filename="${filename}"\r\ncontent-type: text/plain\r\n\r\n${data}`

t.test('a form cut off inside a dropped part or a file: 422, and the mock goes on serving', async (t) => {
  const mock = await startMockProcess(t, 'file-manager', ['--status-step-ms', '0'])
  // Cut inside a part under another field (dropped unread), then inside a `files` part.
  for (const [what, body] of [
    ['a dropped part', part('other', 'x.txt', 'half of it')],
    ['a file', part('files', 'notes.txt', 'half of it')],
  ] as const) {
    const reply = await upload(mock.url, Buffer.from(body))
    t.equal(reply.status, 422, `cut inside ${what}: refused`)
    t.match(JSON.parse(reply.body), { detail: /multipart body could not be read/ })
  }
  const whole = await upload(mock.url, Buffer.from(`${part('files', 'notes.txt', 'all of it')}\r\n--${BOUNDARY}--\r\n`))
  t.equal(whole.status, 200, 'a whole form afterwards is served: the process is alive')
})
