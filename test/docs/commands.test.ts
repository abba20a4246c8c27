// The docs check, running half: every ```sh / ```bash / ```console block of README.md,
// docs/*.md, CHANGELOG.md and bench/README.md runs, as written, against a gateway started on
// the embedded defaults (a temporary data directory, the admin token it makes on its first
// start, as `npm start` does), and exits 0. Each block runs in its own `bash -e -o pipefail`
// from the repository's root, so every command of it must succeed, with a 30 s timeout.
// Every ```js block runs too, as an .mjs file on this Node with the openai SDK of
// node_modules (`node hello.mjs`, as the README says).
//
// What the check provides, as the pages document it:
// - the variables the pages use: TOLLGATE_KEY (a Standard1000 key), TOLLGATE_ADMIN_TOKEN (the
//   stored token), TOLLGATE_URL, TOLLGATE_DATA_DIR, ACCESS_TOKEN and REFRESH_TOKEN (a RAG
//   account's login, a fresh one per block: a block may log out), STORE (a vector store of TOLLGATE_KEY's), ALICE_PASSWORD, NEW_PASSWORD;
// - substitutions in the text: http://127.0.0.1:8080 and localhost:8080 become the gateway's
//   address; `key_…` a key made for that block; `qreq_…` a stored request made for that
//   block, still waiting in line (its key, the block's TOLLGATE_KEY, allows 1 request a
//   minute and has spent it), so it can be shown and cancelled; `@report.pdf` a small file in
//   a temporary directory; in the RAG walk, `file_…`, `mock://…` and `sess_…` a file uploaded
//   and a chat session made, for ACCESS_TOKEN's user, the way the walk's own first steps do;
// - `npx tollgate` runs bin/tollgate, the file npx resolves it to, without npm's two seconds
//   of start-up per call.
// A block that cannot run here (docker, a server in the foreground, the whole suite) is
// marked `<!-- docs-check: skip (why) -->` before its fence; the skips are listed below and
// kept few (MAX_SKIPS).
import { spawn } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { blocksOf, docFiles, ROOT, SHELL, type Block } from './markdown.ts'

const RUN = new Set([...SHELL, 'js', 'mjs', 'javascript'])
const isShell = (b: Block): boolean => SHELL.has(b.lang)

const MAX_SKIPS = 7
const TIMEOUT_MS = 30_000

const blocks = docFiles().flatMap((f) => blocksOf(f, readFileSync(join(ROOT, f), 'utf8'))).filter((b) => RUN.has(b.lang))
const skipped = blocks.filter((b) => b.skip !== undefined)
const runnable = blocks.filter((b) => b.skip === undefined)

t.test('the skipped shell blocks, each with its reason', async (t) => {
  for (const b of skipped) t.comment(`skipped ${b.file}:${b.line}: ${b.skip}`)
  t.ok(skipped.length <= MAX_SKIPS, `${skipped.length} skipped of ${blocks.length} (at most ${MAX_SKIPS})`)
  t.ok(runnable.filter(isShell).length >= 8, `${runnable.filter(isShell).length} shell blocks run`)
  t.ok(runnable.filter((b) => !isShell(b)).length >= 3, `${runnable.filter((b) => !isShell(b)).length} js blocks run`)
})

const gw = await startTollgate({
  // As `npm start` on a fresh clone: no token in the environment, so the gateway makes one.
  env: { TOLLGATE_ADMIN_TOKEN: '' },
})
t.teardown(() => gw.stop())
const adminToken = readFileSync(join(gw.dataDir, 'admin.token'), 'utf8').trim()
const address = new URL(gw.url)

async function call(path: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await fetch(`${gw.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const json = await res.json() as Record<string, unknown>
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`)
  return json
}
const newKey = async (): Promise<{ id: string; key: string }> =>
  await call('/admin/keys', adminToken, { name: 'docs check', tier: 'Standard1000' }) as { id: string; key: string }

const { key } = await newKey()
const password = 'docs check: a long password'
await call('/admin/users', adminToken, { username: 'docs-reader', password, roles: ['user'] })
const store = await call('/v1/vector_stores', key, { name: 'docs check' })

const scratch = mkdtempSync(join(tmpdir(), 'tollgate-docs-'))
// A script here finds the openai SDK as it would in the checkout.
symlinkSync(join(ROOT, 'node_modules'), join(scratch, 'node_modules'))
writeFileSync(join(scratch, 'report.pdf'), 'A report: the holidays are 30 days a year.\n')
// `npx tollgate …` as bin/tollgate; any other npx call goes to npm's own.
const bin = join(scratch, 'bin')
mkdirSync(bin)
writeFileSync(join(bin, 'npx'), `#!/usr/bin/env bash\nif [ "$1" = tollgate ]; then shift; exec "${join(ROOT, 'bin/tollgate')}" "$@"; fi\nPATH="${process.env.PATH ?? ''}" exec npx "$@"\n`)
chmodSync(join(bin, 'npx'), 0o755)

const env: Env = {
  PATH: `${bin}:${join(ROOT, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
  HOME: process.env.HOME ?? '',
  npm_config_offline: 'true',
  TOLLGATE_DATA_DIR: gw.dataDir,
  TOLLGATE_URL: gw.url,
  TOLLGATE_ADMIN_TOKEN: adminToken,
  TOLLGATE_KEY: key,
  STORE: String(store.id),
  ALICE_PASSWORD: 'alice: correct horse battery staple',
  NEW_PASSWORD: 'alice: a new and longer password',
}

type Env = Record<string, string>
const requestLines = (): Array<Record<string, unknown>> => gw.logs().filter((l) => typeof l.status === 'number')
const CHAT = { model: 'Mistral-Small-24B-Instruct-2501', messages: [{ role: 'user', content: 'docs check' }] }

/** The block's text with the documented substitutions, each made only when the block needs it, and its environment. */
async function prepare(b: Block): Promise<{ code: string; env: Env }> {
  let code = b.code
    .replaceAll('http://127.0.0.1:8080', gw.url)
    .replaceAll('localhost:8080', address.host)
    .replaceAll('@report.pdf', `@${join(scratch, 'report.pdf')}`)
  let own: Env = env
  if (code.includes('key_…')) code = code.replaceAll('key_…', (await newKey()).id)
  if (/ACCESS_TOKEN|REFRESH_TOKEN/.test(code)) {
    // A session of its own: a block may log out (and so end the session it was given).
    const fresh = await call('/api/v1/auth/user', '', { username: 'docs-reader', password })
    own = { ...own, ACCESS_TOKEN: String(fresh.access_token), REFRESH_TOKEN: String(fresh.refresh_token) }
  }
  if (/file_…|sess_…|mock:\/\/…|mock%3A%2F%2F…/.test(code)) {
    const { fileId, fileUri, sessionId } = await ragObjects(own.ACCESS_TOKEN ?? '')
    code = code.replaceAll('file_…', fileId).replaceAll('mock%3A%2F%2F…', encodeURIComponent(fileUri))
      .replaceAll('mock://…', fileUri).replaceAll('sess_…', sessionId)
  }
  if (code.includes('qreq_…')) {
    // A key that has spent its one request of the minute: what it stores waits in line.
    const slow = await call('/admin/keys', adminToken, { name: 'docs check, 1 rpm', tier: 'Standard1000', limits: { '*': { rpm: 1 } } }) as { key: string }
    await call('/v2/chat/completions', slow.key, CHAT)
    const stored = await call('/queue/chat/completions', slow.key, CHAT, { prefer: 'respond-async' })
    code = code.replaceAll('qreq_…', String(stored.id))
    own = { ...own, TOLLGATE_KEY: slow.key }
  }
  return { code, env: own }
}

/** A file and a chat session of ACCESS_TOKEN's user on the RAG mock: what the SmartChat walk names. */
async function ragObjects(accessToken: string): Promise<{ fileId: string; fileUri: string; sessionId: string }> {
  const authorization = `Bearer ${accessToken}`
  const form = new FormData()
  form.append('files', new Blob([readFileSync(join(scratch, 'report.pdf'))]), 'report.pdf')
  const upload = await fetch(`${gw.url}/file-manager/api/v1/files/?kb=local`, { method: 'POST', headers: { authorization }, body: form })
  if (upload.status !== 200) throw new Error(`RAG upload: ${upload.status} ${await upload.text()}`)
  const [file] = await upload.json() as Array<{ fileId: string; fileUri: string }>
  if (file === undefined) throw new Error('RAG upload: no file in the reply')
  const config = { localConfigId: 'default', globalContext: false, activeFiles: [file.fileId], chatModel: 'mock-llm' }
  const session = await fetch(`${gw.url}/chat-session-manager/api/v1/sessions/`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'docs check', config }),
  })
  const { sessionId } = await session.json() as { sessionId: string }
  return { fileId: file.fileId, fileUri: file.fileUri, sessionId }
}

function run(b: Block, code: string, blockEnv: Env): Promise<{ code: number | null; out: string }> {
  let command = ['bash', '-e', '-o', 'pipefail', '-c', code]
  if (!isShell(b)) {
    const file = join(scratch, `${b.file.replace(/\W/g, '-')}-${b.line}.mjs`)
    writeFileSync(file, code)
    command = [process.execPath, file]
  }
  return new Promise((done) => {
    // Through `env -i`: tap hooks the processes a test spawns (NODE_OPTIONS with its own
    // loader), which bin/tollgate, an extensionless module, cannot run under.
    const pairs = Object.entries(blockEnv).map(([k, v]) => `${k}=${v}`)
    const child = spawn('/usr/bin/env', ['-i', ...pairs, ...command], { cwd: isShell(b) ? ROOT : scratch, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (c: string) => { out += c })
    child.stderr.setEncoding('utf8').on('data', (c: string) => { out += c })
    const timer = setTimeout(() => { out += `\n(killed after ${TIMEOUT_MS} ms)`; child.kill('SIGKILL') }, TIMEOUT_MS)
    child.once('close', (status) => { clearTimeout(timer); done({ code: status, out }) })
  })
}

for (const b of runnable) {
  t.test(`${b.file}:${b.line}`, async (t) => {
    const prepared = await prepare(b)
    const before = requestLines().length
    const result = await run(b, prepared.code, prepared.env)
    const statuses = requestLines().slice(before).map((l) => `${String(l.status)} ${String(l.route)}`)
    if (process.env.DOCS_CHECK_VERBOSE) t.comment(`${result.out.replace(/\r/g, '\n')}\ngateway: ${statuses.join(', ')}`)
    t.equal(result.code, 0, `exits 0${result.code === 0 ? '' : `:\n${result.out.slice(-2000)}`}`)
    // The pages show calls that work: a refusal in a walk-through is a page out of date.
    t.same(statuses.filter((s) => !/^[23]/.test(s)), [], 'and the gateway answered every call of it with a 2xx or 3xx')
  })
}

t.test('the gateway logged no error while the commands ran', async (t) => {
  const errors = gw.logs().filter((l) => typeof l.level === 'number' && l.level >= 50)
  t.same(errors, [])
})
