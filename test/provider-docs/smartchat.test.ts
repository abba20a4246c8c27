// Issue 27, item 7: the provider's SmartChat guides run unchanged against Tollgate as
// `npm start` starts it (the default configuration: the built-in RAG mock behind the RAG
// gateway). The guides are telekom/aifoundation-docs, src/content/docs/v1/smartchat/:
// overview.mdx, api-reference.mdx, local-chat.mdx and global-chat.mdx. Their Python
// (requests) is carried over call by call through pyRequest, which sends what requests
// sends: the same paths, params (a list as its key repeated), bodies, multipart field
// names, and the same headers dict on every call, whose "Content-Type: application/json"
// requests keeps even on the multipart upload. Each step names its page.
import t, { type Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { pollUntil, transitions } from '../helpers/poll.ts'
import { pyRequest, type PyFile } from './python-requests.ts'

const USERNAME = 'ada'
const PASSWORD = 'a long and correct password'
/** Between two polls (the guides wait 2 s between upload polls, and not at all between ingest polls). */
const POLL_MS = 10
/** Polls at most: far more than the default 250 ms status step needs, bounded all the same. */
const POLLS = 2000

interface UserConfig {
  readonly userGroupId: string
  readonly localKbConfigs: ReadonlyArray<{
    readonly id: string
    readonly allowed_llms: ReadonlyArray<{ readonly name: string }>
  }>
}

interface FileStatus {
  readonly fileId: string
  readonly userId: string
  readonly fileName: string
  readonly fileUri: string
  readonly status: string
}

const UPLOAD_STATES = ['pending', 'uploaded', 'duplicated']
const UPLOAD_FAILED = ['error', 'file_too_large', 'file_type_not_supported']
const INGEST_STATES = ['queued', 'ingesting', 'ingested']

/** True when `seen` only moves forward through `order` (states may be skipped by a slow poll). */
function inOrder(seen: readonly string[], order: readonly string[]): boolean {
  const at = seen.map((s) => order.indexOf(s))
  return at.every((i, n) => i >= 0 && (n === 0 || i >= (at[n - 1] ?? 0)))
}

function pdf(name: string, text: string): PyFile {
  return { filename: name, data: Buffer.from(`%PDF-1.4\n% ${text}\n%%EOF\n`) }
}

async function createAccount(gw: RunningTollgate, username: string, groups: readonly string[]): Promise<string> {
  // overview.mdx, "Getting Started": credentials come from the platform team, here the admin API.
  // The guides' prerequisite is a CHAT_USER role.
  const res = await fetch(`${gw.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: PASSWORD, roles: ['CHAT_USER'], groups, tenant: 'acme' }),
  })
  if (res.status !== 201) throw new Error(`account: ${res.status} ${await res.text()}`)
  return ((await res.json()) as { id: string }).id
}

/** local-chat.mdx / global-chat.mdx step 1 (and api-reference.mdx, "Authentication", Python tab). */
async function authenticate(t: Test, base: string, username: string): Promise<Record<string, string>> {
  const payload = JSON.stringify({ username, password: PASSWORD })
  const headers: Record<string, string> = { 'Content-Type': 'application/json' }
  const response = await pyRequest('POST', `${base}/api/v1/auth/user`, { headers, data: payload })
  t.equal(response.status, 200, 'authenticated')
  headers.Authorization = `Bearer ${((await response.json()) as { access_token: string }).access_token}`
  return headers
}

/** local-chat.mdx / global-chat.mdx step 2: the default group's first local KB configuration. */
async function defaultChatConfig(
  t: Test,
  base: string,
  headers: Record<string, string>,
): Promise<{ localConfigId: string; chatModel: string }> {
  const response = await pyRequest('GET', `${base}/config-manager/api/v1/user/configs`, { headers })
  t.equal(response.status, 200, 'GET /config-manager/api/v1/user/configs')
  const configs = (await response.json()) as UserConfig[]
  const defaultConfig = configs.filter((c) => c.userGroupId === 'default')[0]
  const local = defaultConfig?.localKbConfigs[0]
  t.ok(local !== undefined && typeof local.id === 'string', 'a default config with a local KB config id')
  t.ok(typeof local?.allowed_llms[0]?.name === 'string', 'and its allowed LLMs by name')
  return { localConfigId: local?.id ?? '', chatModel: local?.allowed_llms[0]?.name ?? '' }
}

/** local-chat.mdx step 3: upload with kb=local, then poll by fileIds until every file is uploaded. */
async function uploadFiles(
  t: Test,
  base: string,
  headers: Record<string, string>,
  files: readonly PyFile[],
): Promise<FileStatus[]> {
  const params = { kb: 'local' }
  const response = await pyRequest('POST', `${base}/file-manager/api/v1/files/`, {
    headers,
    params,
    files: files.map((f) => ['files', f] as const),
  })
  t.equal(response.status, 200, 'POST /file-manager/api/v1/files/?kb=local')
  const pendingFiles = (await response.json()) as FileStatus[]
  const pendingFileIds = pendingFiles.map((f) => f.fileId)
  t.equal(pendingFileIds.length, files.length, 'one answer per file, each with a fileId')
  t.ok(
    pendingFiles.every((f) => f.status === 'pending'),
    'answered before the files are stored: pending',
  )

  const polled = await pollUntil(
    async () => {
      const response = await pyRequest('GET', `${base}/file-manager/api/v1/files/`, {
        headers,
        params: { kb: 'local', fileIds: pendingFileIds },
      })
      return (await response.json()) as FileStatus[]
    },
    (files) =>
      files.every((f) => ['uploaded', 'duplicated'].includes(f.status)) ||
      files.every((f) => UPLOAD_FAILED.includes(f.status)),
    POLLS,
    POLL_MS,
  )
  t.ok(polled.met && polled.value.every((f) => f.status === 'uploaded'), "the guide's loop ends: every file uploaded")
  t.same(
    polled.value.map((f) => f.fileId),
    pendingFileIds,
    'the files polled by fileIds are those uploaded',
  )
  const states = transitions(
    pendingFiles.map((f) => f.status).concat(polled.seen.map((files) => files[0]?.status ?? '')),
  )
  t.ok(inOrder(states, UPLOAD_STATES) && states[0] === 'pending', `uploads went ${states.join(' → ')}`)
  return polled.value
}

/** local-chat.mdx step 4: a task per file, then POST tasks/file until its last task says ingested. */
async function ingestFiles(
  t: Test,
  base: string,
  headers: Record<string, string>,
  uploadedFiles: readonly FileStatus[],
): Promise<FileStatus[]> {
  for (const uploadedFile of uploadedFiles) {
    const metadata = {
      file_id: uploadedFile.fileId,
      user_id: uploadedFile.userId,
      file_name: uploadedFile.fileName,
      file_uri: uploadedFile.fileUri,
    }
    const body = { filePath: uploadedFile.fileUri, role: 'user', metadata }
    const task = await pyRequest('POST', `${base}/ingest-master/api/v1/task`, { headers, json: body })
    t.equal(task.status, 202, 'POST /ingest-master/api/v1/task')
    const queued = ((await task.json()) as { status: string }).status

    const polled = await pollUntil(
      async () => {
        const params = { file_path: uploadedFile.fileUri, role: 'user' }
        const response = await pyRequest('POST', `${base}/ingest-master/api/v1/tasks/file`, { headers, params })
        return ((await response.json()) as Array<{ status: string }>).at(-1)?.status ?? ''
      },
      (status) => status === 'ingested' || status === 'ingestion_failed',
      POLLS,
      POLL_MS,
    )
    t.equal(polled.value, 'ingested', `${uploadedFile.fileName} ingested`)
    const states = transitions([queued, ...polled.seen])
    t.ok(states[0] === 'queued' && inOrder(states, INGEST_STATES), `ingestion went ${states.join(' → ')}`)
  }
  return [...uploadedFiles]
}

/** local-chat.mdx step 5 / global-chat.mdx step 3. */
async function createSession(
  t: Test,
  base: string,
  headers: Record<string, string>,
  config: Record<string, unknown>,
): Promise<string> {
  const body = { title: 'Testing the SmartChat RAG API', config }
  const response = await pyRequest('POST', `${base}/chat-session-manager/api/v1/sessions/`, { headers, json: body })
  t.equal(response.status, 201, 'POST /chat-session-manager/api/v1/sessions/')
  const sessionId = ((await response.json()) as { sessionId?: unknown }).sessionId
  t.type(sessionId, 'string', 'the session is named by sessionId')
  return String(sessionId)
}

/** local-chat.mdx step 6 / global-chat.mdx step 4: through query-pipelines, the guides' spelling. */
async function chat(t: Test, base: string, headers: Record<string, string>, sessionId: string): Promise<void> {
  const body = { sessionId, userPrompt: 'Can you summarize the context to me?' }
  const response = await pyRequest('POST', `${base}/query-pipelines/api/v1/chat`, { headers, json: body })
  t.equal(response.status, 200, 'POST /query-pipelines/api/v1/chat')
  const answer = (await response.json()) as { sessionId: string; answer: string; mock: boolean }
  t.equal(answer.sessionId, sessionId, 'the answer belongs to the session')
  t.match(
    answer.answer,
    /mock answer .*summarize the context/,
    'an answer to the prompt (from the mock, and saying so)',
  )
}

t.test('the SmartChat guides against tollgate serve with the default configuration', async (t) => {
  const gw = await startTollgate({})
  t.teardown(() => gw.stop())
  const base = gw.url
  const userId = await createAccount(gw, USERNAME, ['research'])
  await createAccount(gw, 'grace', ['support']) // another user of the same tenant

  await t.test('api-reference.mdx: authenticate, then call a service with the token', async (t) => {
    // "Authentication", Python tab: the same headers dict, with the token added.
    const headers = await authenticate(t, base, USERNAME)
    const sessions = await pyRequest('GET', `${base}/chat-session-manager/api/v1/sessions/`, { headers })
    t.equal(sessions.status, 200, 'GET /chat-session-manager/api/v1/sessions/')
    // "Authentication", curl tab: only the Authorization header.
    const curl = await fetch(`${base}/chat-session-manager/api/v1/sessions/`, {
      headers: { authorization: headers.Authorization ?? '' },
    })
    t.equal(curl.status, 200, 'and as curl sends it')
    // "Base URL & Routing" and the "Services" table: each service's reference, and the gateway's.
    for (const path of [
      '/redoc',
      '/config-manager/redoc',
      '/user-manager/redoc',
      '/file-manager/redoc',
      '/ingest-master/redoc',
      '/chat-session-manager/redoc',
      '/query-pipeline/redoc',
    ]) {
      t.equal((await fetch(`${base}${path}`)).status, 200, `GET ${path}`)
    }
    // Each service's openapi.json (what its redoc loads) lists the routes the guides call.
    const documented: Record<string, readonly string[]> = {
      'config-manager': ['get /api/v1/user/configs'],
      'file-manager': ['post /api/v1/files/', 'get /api/v1/files/'],
      'ingest-master': ['post /api/v1/task', 'post /api/v1/tasks/file'],
      'chat-session-manager': ['get /api/v1/sessions/', 'post /api/v1/sessions/'],
      'query-pipelines': ['post /api/v1/chat'],
    }
    for (const [service, routes] of Object.entries(documented)) {
      const spec = (await (await fetch(`${base}/${service}/openapi.json`)).json()) as {
        paths: Record<string, Record<string, unknown>>
      }
      const listed = Object.entries(spec.paths).flatMap(([path, ops]) =>
        Object.keys(ops).map((method) => `${method} ${path}`),
      )
      t.ok(
        routes.every((r) => listed.includes(r)),
        `${service}/openapi.json lists ${routes.join(', ')}`,
      )
    }
  })

  await t.test('local-chat.mdx: authenticate, configs, upload, ingest, session, chat', async (t) => {
    const headers = await authenticate(t, base, USERNAME) // step 1
    const { localConfigId, chatModel } = await defaultChatConfig(t, base, headers) // step 2
    // step 3: two PDF files (the guide's prerequisite: "A PDF file to upload")
    const uploadedFiles = await uploadFiles(t, base, headers, [
      pdf('handbook.pdf', 'the first file'),
      pdf('minutes.pdf', 'the second file'),
    ])
    t.ok(
      uploadedFiles.every((f) => f.userId === userId && typeof f.fileUri === 'string' && f.fileUri !== ''),
      "each file has the caller's userId and a fileUri",
    )
    const ingestedFiles = await ingestFiles(t, base, headers, uploadedFiles) // step 4
    // step 5: a local session over the ingested files
    const sessionId = await createSession(t, base, headers, {
      localConfigId,
      globalContext: false,
      activeFiles: ingestedFiles.map((f) => f.fileId),
      chatModel,
    })
    await chat(t, base, headers, sessionId) // step 6
  })

  await t.test('global-chat.mdx: authenticate, configs, a global session, chat', async (t) => {
    const headers = await authenticate(t, base, USERNAME) // step 1
    const { localConfigId, chatModel } = await defaultChatConfig(t, base, headers) // step 2
    const sessionId = await createSession(t, base, headers, { localConfigId, globalContext: true, chatModel }) // step 3
    await chat(t, base, headers, sessionId) // step 4
  })

  await t.test('local-chat.mdx step 3: the documented upload statuses and their ends', async (t) => {
    const headers = await authenticate(t, base, USERNAME)
    const upload = (files: readonly PyFile[]): Promise<FileStatus[]> =>
      pyRequest('POST', `${base}/file-manager/api/v1/files/`, {
        headers,
        params: { kb: 'local' },
        files: files.map((f) => ['files', f] as const),
      }).then((r) => r.json() as Promise<FileStatus[]>)
    const list = (fileIds: readonly string[]): Promise<FileStatus[]> =>
      pyRequest('GET', `${base}/file-manager/api/v1/files/`, { headers, params: { kb: 'local', fileIds } }).then(
        (r) => r.json() as Promise<FileStatus[]>,
      )

    // The guide's failure branch: every file refused, so its loop raises at once.
    const refused = await upload([
      { filename: 'tool.exe', data: Buffer.from('MZ') },
      { filename: 'error-report.pdf', data: Buffer.from('%PDF') },
    ])
    t.same(
      refused.map((f) => f.status),
      ['file_type_not_supported', 'error'],
      "refused files are final in the upload's answer",
    )
    t.same(
      (await list(refused.map((f) => f.fileId))).map((f) => f.status),
      ['file_type_not_supported', 'error'],
      'and when polled',
    )

    // The same content again: "duplicated", which the guide's loop accepts like "uploaded".
    const again = await upload([pdf('handbook-copy.pdf', 'the first file')])
    const settled = await pollUntil(
      () => list(again.map((f) => f.fileId)),
      (files) => files[0]?.status !== 'pending',
      POLLS,
      POLL_MS,
    )
    t.equal(settled.value[0]?.status, 'duplicated', 'a file the caller already has is duplicated')
    t.match(settled.value[0]?.fileUri, /handbook\.pdf$/, 'and points at the stored copy')
  })

  await t.test('local-chat.mdx step 3: fileIds as Python requests sends a list (the key repeated)', async (t) => {
    const headers = await authenticate(t, base, USERNAME)
    const uploaded = await pyRequest('POST', `${base}/file-manager/api/v1/files/`, {
      headers,
      params: { kb: 'local' },
      files: [
        ['files', pdf('a.pdf', 'a')],
        ['files', pdf('b.pdf', 'b')],
        ['files', pdf('c.pdf', 'c')],
      ],
    }).then((r) => r.json() as Promise<FileStatus[]>)
    const [a, , c] = uploaded.map((f) => f.fileId)
    const res = await pyRequest('GET', `${base}/file-manager/api/v1/files/`, {
      headers,
      params: { kb: 'local', fileIds: [c ?? '', a ?? ''] },
    })
    t.match(new URL(res.url).search, /^\?kb=local&fileIds=[^&]+&fileIds=[^&]+$/, 'the query has fileIds twice')
    t.same(
      ((await res.json()) as FileStatus[]).map((f) => f.fileName),
      ['c.pdf', 'a.pdf'],
      'exactly the files named, in the order asked',
    )

    // Another user's file id names nothing for this caller.
    const grace = await authenticate(t, base, 'grace')
    const hers = await pyRequest('GET', `${base}/file-manager/api/v1/files/`, {
      headers: grace,
      params: { kb: 'local', fileIds: [a ?? ''] },
    })
    t.same(await hers.json(), [], 'another user asking for the file sees nothing')
    const configs = await pyRequest('GET', `${base}/config-manager/api/v1/user/configs`, { headers: grace }).then(
      (r) => r.json() as Promise<UserConfig[]>,
    )
    t.same(
      configs.map((g) => g.userGroupId),
      ['default', 'support'],
      'her user groups: default, then her own',
    )
  })

  await t.test('local-chat.mdx step 3: the files go in the multipart field "files"', async (t) => {
    const headers = await authenticate(t, base, USERNAME)
    const wrongField = await pyRequest('POST', `${base}/file-manager/api/v1/files/`, {
      headers,
      params: { kb: 'local' },
      files: [['file', pdf('x.pdf', 'x')]],
    })
    t.equal(wrongField.status, 422, 'a file under another field name is not an upload')
    t.match(await wrongField.json(), { detail: /"files"/ }, 'and the answer names the field')
    // The same upload with the Content-Type a browser or curl -F sends works too.
    const form = new FormData()
    form.append('files', new Blob([Buffer.from('%PDF-1.4 form')]), 'form.pdf')
    const proper = await fetch(`${base}/file-manager/api/v1/files/?kb=local`, {
      method: 'POST',
      headers: { authorization: headers.Authorization ?? '' },
      body: form,
    })
    t.equal(proper.status, 200)
    t.same(
      ((await proper.json()) as FileStatus[]).map((f) => [f.fileName, f.status]),
      [['form.pdf', 'pending']],
    )
  })

  await t.test('local-chat.mdx step 4: the ingestion_failed branch', async (t) => {
    const headers = await authenticate(t, base, USERNAME)
    // The mock fails the ingestion of a file whose path says "fail".
    const [file] = await uploadFiles(t, base, headers, [pdf('will-fail.pdf', 'a file that does not ingest')])
    const task = await pyRequest('POST', `${base}/ingest-master/api/v1/task`, {
      headers,
      json: { filePath: file?.fileUri, role: 'user', metadata: { file_id: file?.fileId } },
    })
    t.equal(task.status, 202)
    const polled = await pollUntil(
      async () => {
        const res = await pyRequest('POST', `${base}/ingest-master/api/v1/tasks/file`, {
          headers,
          params: { file_path: file?.fileUri ?? '', role: 'user' },
        })
        return ((await res.json()) as Array<{ status: string }>).at(-1)?.status ?? ''
      },
      (status) => status === 'ingested' || status === 'ingestion_failed',
      POLLS,
      POLL_MS,
    )
    t.equal(polled.value, 'ingestion_failed', 'the guide\'s loop raises "Couldn\'t ingest file"')
    const other = await authenticate(t, base, 'grace')
    const theirs = await pyRequest('POST', `${base}/ingest-master/api/v1/tasks/file`, {
      headers: other,
      params: { file_path: file?.fileUri ?? '', role: 'user' },
    })
    t.equal(theirs.status, 404, "another user does not see the file's tasks")
  })
})
