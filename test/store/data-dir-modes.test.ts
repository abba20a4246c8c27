// The data directory holds password and session hashes, the key-hash secret and the admin
// token: a gateway makes it 0700 and everything in it 0600 (SQLite's -wal and -shm too,
// the file quota, uploads in the spool, the mock's files), and tightens a directory an
// older Tollgate left 0755 with 0644 databases, saying so in its log.
import { chmodSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

/** Every path under dir with its permission bits (symbolic links are not followed). */
function modes(dir: string): Map<string, { mode: number; dir: boolean }> {
  const found = new Map<string, { mode: number; dir: boolean }>()
  const walk = (at: string): void => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name)
      if (entry.isSymbolicLink()) continue
      // An upload's spool file is removed once forwarded, which may be after its reply came.
      const stat = statSync(path, { throwIfNoEntry: false })
      if (stat === undefined) continue
      found.set(path, { mode: stat.mode & 0o777, dir: entry.isDirectory() })
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(dir)
  return found
}

async function exercise(gw: RunningTollgate): Promise<void> {
  // Started without TOLLGATE_ADMIN_TOKEN, so that admin.token is made: the stored one.
  const admin = readFileSync(join(gw.dataDir, 'admin.token'), 'utf8').trim()
  const created = await fetch(`${gw.url}/admin/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
    body: '{"name": "modes"}',
  })
  const { key } = (await created.json()) as { key: string }
  const form = new FormData()
  form.set('purpose', 'assistants')
  form.set('file', new Blob(['{"hello": "world"}\n']), 'data.jsonl')
  const upload = await fetch(`${gw.url}/v2/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}` },
    body: form,
  })
  if (upload.status !== 200) throw new Error(`upload: ${upload.status} ${await upload.text()}`)
}

function checkPrivate(t: Test, dataDir: string): void {
  t.equal(statSync(dataDir).mode & 0o777, 0o700, 'the data directory is 0700')
  const found = modes(dataDir)
  const names = [...found.keys()].map((p) => p.slice(dataDir.length + 1))
  for (const expected of [
    'tollgate.db',
    'tollgate.db-wal',
    'tollgate.db-shm',
    'portal.db',
    'queue.db',
    'file-quota.db',
    'admin.token',
    'key-hash.secret',
    'spool',
    'mock-files',
  ]) {
    t.ok(names.includes(expected), `${expected} is there`)
  }
  const loose = [...found]
    .filter(([, e]) => e.mode !== (e.dir ? 0o700 : 0o600))
    .map(([p, e]) => `${p}: 0${e.mode.toString(8)}`)
  t.same(loose, [], `all ${found.size} files are 0600 and directories 0700`)
}

t.test('a fresh data directory: owner-only from the start', async (t) => {
  const gw = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  t.teardown(() => gw.stop())
  await exercise(gw)
  checkPrivate(t, gw.dataDir)
})

t.test('a data directory left readable by an older Tollgate is tightened, and the log says so', async (t) => {
  const first = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' } })
  t.teardown(() => first.stop())
  await exercise(first)
  t.equal(await first.stop(), 0)
  // As an older Tollgate left it under umask 022.
  for (const [path, entry] of modes(first.dataDir)) chmodSync(path, entry.dir ? 0o755 : 0o644)
  chmodSync(first.dataDir, 0o755)

  const second = await startTollgate({ env: { TOLLGATE_ADMIN_TOKEN: '' }, dataDir: first.dataDir })
  t.teardown(() => second.stop())
  const line = second
    .logs()
    .find((l) => typeof l.msg === 'string' && l.msg.startsWith('data directory: modes tightened'))
  t.ok(line, 'a warning says what was changed')
  t.equal(line?.level, 40)
  const changes = (line?.changes ?? []) as string[]
  t.ok(
    changes.some((c) => c === `${first.dataDir}: 0755 -> 0700`),
    'the directory itself',
  )
  t.ok(
    changes.some((c) => c === `${join(first.dataDir, 'portal.db')}: 0644 -> 0600`),
    'the portal database (session hashes)',
  )
  t.ok(
    changes.some((c) => c === `${join(first.dataDir, 'tollgate.db')}: 0644 -> 0600`),
    'the main database (password hashes)',
  )
  await exercise(second)
  checkPrivate(t, second.dataDir)
})
