// The RAG flow a user walks: list sessions, stream a chat through query-pipelines, upload
// files to file-manager and ingest them, read a service's public reference. flows.test.ts
// walks it with test-signed tokens; login.test.ts with a real login on tollgate serve.
import type { Test } from 'tap'
import { pollUntil } from '../helpers/poll.ts'

interface UploadedFile {
  readonly fileId: string
  readonly userId: string
  readonly fileName: string
  readonly fileUri: string | null
  readonly status: string
}

interface MockBody {
  readonly mock: boolean
  readonly identity: Record<string, string>
  readonly [field: string]: unknown
}

/** Who the backends must be told is calling: the identity headers as the gateway sets them. */
export interface Caller {
  readonly userId: string
  /** As sent: percent-encoded. */
  readonly username: string
  readonly roles: string
  readonly groups: string
  readonly tenant: string
}

/** The flow on a gateway at `url`, as the caller whose bearer token is in `headers`. */
export async function ragFlow(t: Test, url: string, headers: Record<string, string>, who: Caller): Promise<void> {
  const h = { url }

  await t.test('lists sessions', async (t) => {
    const res = await fetch(`${h.url}/chat-session-manager/api/v1/sessions/`, { headers })
    t.equal(res.status, 200)
    t.ok(res.headers.get('x-ratelimit-limit-requests'), 'rate limit headers')
    const body = (await res.json()) as MockBody & { sessions: Array<{ id: string; owner: string }> }
    t.equal(body.mock, true, 'says it is a mock')
    t.equal(body.sessions[0]?.owner, who.userId, 'the backend knew the caller from the identity header')
    t.same(
      body.identity,
      {
        'x-tollgate-user-id': who.userId,
        'x-tollgate-user-name': who.username,
        'x-tollgate-user-roles': who.roles,
        'x-tollgate-user-groups': who.groups,
        'x-tollgate-tenant': who.tenant,
      },
      'identity headers as the gateway set them',
    )

    const created = await fetch(`${h.url}/chat-session-manager/api/v1/sessions/`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'Compilers' }),
    })
    t.equal(created.status, 201)
    // The provider's guides name a session `sessionId` (it was `id` before issue 27).
    const session = (await created.json()) as { sessionId: string }
    const history = await fetch(`${h.url}/chat-session-manager/api/v1/sessions/${session.sessionId}/history?limit=5`, {
      headers,
    })
    t.equal(history.status, 200)
    t.equal(((await history.json()) as { messages: unknown[] }).messages.length, 2)
    const feedback = await fetch(`${h.url}/chat-session-manager/api/v1/sessions/${session.sessionId}/feedback`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ message_id: 'm1', rating: 'up' }),
    })
    t.equal(feedback.status, 201)
    t.equal(((await feedback.json()) as { status: string }).status, 'recorded')
  })

  await t.test('streams a chat through query-pipelines, token by token', async (t) => {
    const res = await fetch(`${h.url}/query-pipelines/api/v1/query`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'What does the mock say about streaming?', stream: true }),
    })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/event-stream/)
    const reader = res.body?.getReader()
    if (reader === undefined) throw new Error('no body')
    const decoder = new TextDecoder()
    const chunks: string[] = []
    for (let i = 0; i < 10_000; i++) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(decoder.decode(value, { stream: true }))
    }
    const text = chunks.join('')
    t.ok(chunks.length >= 2, `arrived in ${chunks.length} reads, not as one buffered body`)
    t.match(chunks[0], /event: token/, 'the first read carries a token')
    t.notMatch(chunks[0], /event: done/, 'and not the end of the stream')
    const tokens = [...text.matchAll(/event: token\ndata: (.*)\n/g)].map(
      (m) => (JSON.parse(m[1] ?? '{}') as { token: string }).token,
    )
    t.match(tokens.join(''), /mock answer/, 'the answer says it is a mock')
    t.match(text, /event: sources\ndata: .*mock-document-1\.pdf/, 'sources follow the answer')
    t.match(text, new RegExp(`event: done\ndata: .*"x-tollgate-user-id":"${who.userId}"`), 'the pipeline saw who asked')

    const json = await fetch(`${h.url}/query-pipeline/api/v1/query`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'hello' }),
    })
    t.equal(json.status, 200)
    const answer = (await json.json()) as { answer: string; sources: unknown[] }
    t.match(answer.answer, /mock answer/)
    t.equal(answer.sources.length, 2)
  })

  await t.test('uploads files to file-manager and ingests them', async (t) => {
    // The shapes of the provider's Local KB Guide (a list of {fileId, userId, fileName,
    // fileUri, status}; before issue 27 the mock answered {"files": [...]} in snake_case).
    // test/provider-docs/smartchat.test.ts walks the guide itself.
    const form = (): FormData => {
      const f = new FormData()
      f.append('files', new Blob(['# Notes\nhello from the test\n']), 'notes.md')
      f.append('files', new Blob(['MZ']), 'tool.exe')
      f.append('files', new Blob(['x']), 'error-report.txt')
      return f
    }
    const json = { ...headers, 'content-type': 'application/json' }
    const first = await fetch(`${h.url}/file-manager/api/v1/files/upload`, { method: 'POST', headers, body: form() })
    t.equal(first.status, 200)
    const uploaded = (await first.json()) as UploadedFile[]
    t.same(
      uploaded.map((f) => [f.fileName, f.userId]),
      [
        ['notes.md', who.userId],
        ['tool.exe', who.userId],
        ['error-report.txt', who.userId],
      ],
      'each file, and the backend knew the caller',
    )
    t.same(
      uploaded.slice(1).map((f) => f.status),
      ['file_type_not_supported', 'error'],
      'refused files are final at once',
    )
    const listed = async (ids: readonly string[]): Promise<UploadedFile[]> => {
      const query = new URLSearchParams([['kb', 'local'], ...ids.map((id): [string, string] => ['fileIds', id])])
      return (await (
        await fetch(`${h.url}/file-manager/api/v1/files/?${query.toString()}`, { headers })
      ).json()) as UploadedFile[]
    }
    const ids = uploaded.map((f) => f.fileId)
    const stored = await pollUntil(
      () => listed(ids),
      (files) => files[0]?.status !== 'pending',
      2000,
      5,
    )
    t.same(
      stored.value.map((f) => f.status),
      ['uploaded', 'file_type_not_supported', 'error'],
      'the stored file is uploaded',
    )

    const again = await fetch(`${h.url}/file-manager/api/v1/files/?kb=local`, { method: 'POST', headers, body: form() })
    const copyId = ((await again.json()) as UploadedFile[])[0]?.fileId ?? ''
    const copy = await pollUntil(
      () => listed([copyId]),
      (files) => files[0]?.status !== 'pending',
      2000,
      5,
    )
    t.equal(copy.value[0]?.status, 'duplicated', 'the same file again is a duplicate')

    const file = stored.value[0]
    const task = await fetch(`${h.url}/ingest-master/api/v1/task`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ filePath: file?.fileUri, role: 'user', metadata: { file_id: file?.fileId } }),
    })
    t.equal(task.status, 202)
    const status = (): Promise<Array<{ status: string }>> =>
      fetch(
        `${h.url}/ingest-master/api/v1/tasks/file?${new URLSearchParams({ file_path: file?.fileUri ?? '', role: 'user' }).toString()}`,
        { method: 'POST', headers },
      ).then((r) => r.json() as Promise<Array<{ status: string }>>)
    const ingested = await pollUntil(status, (tasks) => tasks.at(-1)?.status === 'ingested', 2000, 5)
    t.ok(ingested.met, 'the file is ingested')

    // The mock's earlier, synchronous ingest route is kept.
    const ingest = await fetch(`${h.url}/ingest-master/api/v1/ingest`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ file_ids: [ids[0], 'file_will_fail'] }),
    })
    t.equal(ingest.status, 202)
    t.same(((await ingest.json()) as { results: unknown[] }).results, [
      { file_id: ids[0], status: 'ingested' },
      { file_id: 'file_will_fail', status: 'ingestion_failed' },
    ])
  })

  await t.test('public reference routes need no token', async (t) => {
    const redoc = await fetch(`${h.url}/file-manager/redoc`)
    t.equal(redoc.status, 200)
    t.match(await redoc.text(), /mock of file-manager/)
    const openapi = await fetch(`${h.url}/query-pipelines/openapi.json`)
    t.equal(openapi.status, 200)
    t.equal(((await openapi.json()) as { openapi: string }).openapi, '3.1.0')
  })
}
