// The docs check's running side (commands.test.ts and commands-rag.test.ts call it): the
// runnable blocks of some pages, run in order against a gateway of their own. What it
// provides and substitutes is said at the top of commands.test.ts, and in docs/development.md.
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { blocksOf, ROOT, SHELL, type Block } from './markdown.ts'

/** The languages whose blocks run: shell, and JavaScript as an .mjs file. */
export const RUNNABLE = new Set([...SHELL, 'js', 'mjs', 'javascript'])
const isShell = (b: Block): boolean => SHELL.has(b.lang)
const TIMEOUT_MS = 60_000
const PASSWORD = 'docs check: a long password'
const CHAT = { model: 'Mistral-Small-24B-Instruct-2501', messages: [{ role: 'user', content: 'docs check' }] }

type Env = Record<string, string>
type Json = Record<string, unknown>

/** The runnable, unskipped blocks of these pages, in order. */
export function runnableBlocks(files: readonly string[]): Block[] {
  return files
    .flatMap((f) => blocksOf(f, readFileSync(join(ROOT, f), 'utf8')))
    .filter((b) => RUNNABLE.has(b.lang) && b.skip === undefined)
}

/** Runs every runnable block of `files` as a subtest of `t`, against one gateway started here. */
export async function runBlocks(t: Test, files: readonly string[]): Promise<void> {
  const blocks = runnableBlocks(files)
  if (blocks.some((b) => isShell(b) && /\bcurl\b/.test(b.code))) {
    // Said once, rather than as every curl block's exit 127.
    t.equal(spawnSync('bash', ['-c', 'command -v curl']).status, 0, 'curl is installed: the pages call it')
  }
  const docs = await startDocsGateway()
  t.teardown(() => docs.gw.stop())
  for (const b of blocks) {
    t.test(`${b.file}:${b.line}`, async (t) => {
      const prepared = await prepare(docs, b)
      const before = requestLines(docs.gw).length
      const result = await run(docs, b, prepared.code, prepared.env)
      const statuses = requestLines(docs.gw)
        .slice(before)
        .map((l) => `${String(l.status)} ${String(l.route)}`)
      if (process.env.DOCS_CHECK_VERBOSE)
        t.comment(`${result.out.replace(/\r/g, '\n')}\ngateway: ${statuses.join(', ')}`)
      t.equal(result.code, 0, `exits 0${result.code === 0 ? '' : `:\n${result.out.slice(-2000)}`}`)
      // The pages show calls that work: a refusal in a walk-through is a page out of date.
      t.same(
        statuses.filter((s) => !/^[23]/.test(s)),
        [],
        'and the gateway answered every call of it with a 2xx or 3xx',
      )
    })
  }
  t.test('the gateway logged no error while the blocks ran', async (t) => {
    t.same(
      docs.gw.logs().filter((l) => typeof l.level === 'number' && l.level >= 50),
      [],
    )
  })
}

interface DocsGateway {
  readonly gw: RunningTollgate
  readonly adminToken: string
  /** What every block's process gets; a block may get more (prepare). */
  readonly env: Env
  /** A directory of the check's own: the report a page uploads, the npx stand-in, .mjs blocks. */
  readonly scratch: string
}

/** A gateway as `npm start` makes it on a fresh clone, and what the pages expect to exist. */
async function startDocsGateway(): Promise<DocsGateway> {
  // No token in the environment, so the gateway makes one and keeps it in its data directory.
  const gw = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  const adminToken = readFileSync(join(gw.dataDir, 'admin.token'), 'utf8').trim()
  const { key } = await newKey(gw, adminToken)
  await call(gw, '/admin/users', adminToken, { username: 'docs-reader', password: PASSWORD, roles: ['user'] })
  const store = await call(gw, '/v1/vector_stores', key, { name: 'docs check' })

  const scratch = mkdtempSync(join(tmpdir(), 'tollgate-docs-'))
  // A script here finds the openai SDK as it would in the checkout.
  symlinkSync(join(ROOT, 'node_modules'), join(scratch, 'node_modules'))
  writeFileSync(join(scratch, 'report.pdf'), 'A report: the holidays are 30 days a year.\n')
  // `npx tollgate …` as bin/tollgate; any other npx call goes to npm's own.
  const bin = join(scratch, 'bin')
  mkdirSync(bin)
  writeFileSync(
    join(bin, 'npx'),
    `#!/usr/bin/env bash\nif [ "$1" = tollgate ]; then shift; exec "${join(ROOT, 'bin/tollgate')}" "$@"; fi\nPATH="${process.env.PATH ?? ''}" exec npx "$@"\n`,
  )
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
  return { gw, adminToken, env, scratch }
}

async function call(
  gw: RunningTollgate,
  path: string,
  token: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Json> {
  const res = await fetch(`${gw.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const json = (await res.json()) as Json
  if (res.status >= 300) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`)
  return json
}

const newKey = async (gw: RunningTollgate, adminToken: string, limits?: Json): Promise<{ id: string; key: string }> =>
  (await call(gw, '/admin/keys', adminToken, {
    name: 'docs check',
    tier: 'Standard1000',
    ...(limits ? { limits } : {}),
  })) as { id: string; key: string }

const requestLines = (gw: RunningTollgate): Json[] => gw.logs().filter((l) => typeof l.status === 'number')

/** The block's text with the documented substitutions, each made only when the block needs it, and its environment. */
async function prepare(docs: DocsGateway, b: Block): Promise<{ code: string; env: Env }> {
  const { gw, adminToken } = docs
  let code = b.code
    .replaceAll('http://127.0.0.1:8080', gw.url)
    .replaceAll('localhost:8080', new URL(gw.url).host)
    .replaceAll('@report.pdf', `@${join(docs.scratch, 'report.pdf')}`)
  let env = docs.env
  if (code.includes('key_…')) code = code.replaceAll('key_…', (await newKey(gw, adminToken)).id)
  if (/ACCESS_TOKEN|REFRESH_TOKEN/.test(code)) {
    // A session of its own: a block may log out (and so end the session it was given).
    const login = await call(gw, '/api/v1/auth/user', '', { username: 'docs-reader', password: PASSWORD })
    env = { ...env, ACCESS_TOKEN: String(login.access_token), REFRESH_TOKEN: String(login.refresh_token) }
  }
  if (/file_…|sess_…|mock:\/\/…|mock%3A%2F%2F…/.test(code)) {
    const { fileId, fileUri, sessionId } = await ragObjects(docs, env.ACCESS_TOKEN ?? '')
    code = code
      .replaceAll('file_…', fileId)
      .replaceAll('mock%3A%2F%2F…', encodeURIComponent(fileUri))
      .replaceAll('mock://…', fileUri)
      .replaceAll('sess_…', sessionId)
  }
  if (code.includes('qreq_…')) {
    // A key that has spent its one request of the minute: what it stores waits in line.
    const slow = await newKey(gw, adminToken, { '*': { rpm: 1 } })
    await call(gw, '/v2/chat/completions', slow.key, CHAT)
    const stored = await call(gw, '/queue/chat/completions', slow.key, CHAT, { prefer: 'respond-async' })
    code = code.replaceAll('qreq_…', String(stored.id))
    env = { ...env, TOLLGATE_KEY: slow.key }
  }
  return { code, env }
}

/** A file and a chat session of ACCESS_TOKEN's user on the RAG mock: what the SmartChat walk names. */
async function ragObjects(
  docs: DocsGateway,
  accessToken: string,
): Promise<{ fileId: string; fileUri: string; sessionId: string }> {
  const authorization = `Bearer ${accessToken}`
  const form = new FormData()
  form.append('files', new Blob([readFileSync(join(docs.scratch, 'report.pdf'))]), 'report.pdf')
  const upload = await fetch(`${docs.gw.url}/file-manager/api/v1/files/?kb=local`, {
    method: 'POST',
    headers: { authorization },
    body: form,
  })
  if (upload.status !== 200) throw new Error(`RAG upload: ${upload.status} ${await upload.text()}`)
  const [file] = (await upload.json()) as Array<{ fileId: string; fileUri: string }>
  if (file === undefined) throw new Error('RAG upload: no file in the reply')
  const config = { localConfigId: 'default', globalContext: false, activeFiles: [file.fileId], chatModel: 'mock-llm' }
  const session = await fetch(`${docs.gw.url}/chat-session-manager/api/v1/sessions/`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify({ title: 'docs check', config }),
  })
  const { sessionId } = (await session.json()) as { sessionId: string }
  return { fileId: file.fileId, fileUri: file.fileUri, sessionId }
}

/** One block in a process of its own: bash -e -o pipefail for shell, node for an .mjs. */
function run(docs: DocsGateway, b: Block, code: string, env: Env): Promise<{ code: number | null; out: string }> {
  let command = ['bash', '-e', '-o', 'pipefail', '-c', code]
  if (!isShell(b)) {
    const file = join(docs.scratch, `${b.file.replace(/\W/g, '-')}-${b.line}.mjs`)
    writeFileSync(file, code)
    command = [process.execPath, file]
  }
  return new Promise((done) => {
    // Through `env -i`: tap hooks the processes a test spawns (NODE_OPTIONS with its own
    // loader), which bin/tollgate, an extensionless module, cannot run under.
    const pairs = Object.entries(env).map(([k, v]) => `${k}=${v}`)
    const child = spawn('/usr/bin/env', ['-i', ...pairs, ...command], {
      cwd: isShell(b) ? ROOT : docs.scratch,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c
    })
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      out += c
    })
    const timer = setTimeout(() => {
      out += `\n(killed after ${TIMEOUT_MS} ms)`
      child.kill('SIGKILL')
    }, TIMEOUT_MS)
    child.once('close', (status) => {
      clearTimeout(timer)
      done({ code: status, out })
    })
  })
}
