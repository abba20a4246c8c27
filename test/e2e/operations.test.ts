// What an operator meets: a bad configuration stops the start with the field's path and
// a non-zero exit; the embedded store keeps keys across a restart; a crash's leftovers
// are cleaned up at the next start.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { defaultConfigDoc, startTollgate } from '../helpers/gateway.ts'

const CLI = resolve(import.meta.dirname, '../../src/cli.ts')

t.test('a bad configuration file is refused at start with the path of the field', async (t) => {
  const doc = defaultConfigDoc()
  ;(doc.models as Array<{ deployments: unknown[] }>)[2]!.deployments = [{ backend: 'vlm' }]
  const path = join(mkdtempSync(join(tmpdir(), 'tg-badcfg-')), 'config.yaml')
  writeFileSync(path, stringify(doc))
  const run = spawnSync(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH ?? '', TOLLGATE_CONFIG: path, PORT: '0', METRICS_PORT: '0' },
    encoding: 'utf8',
    timeout: 20_000,
  })
  t.equal(run.status, 2, 'exit code 2')
  t.match(run.stderr, /models\.2\.deployments\.0\.backend: unknown backend "vlm"/)
  t.notMatch(run.stdout, /listening/, 'never started')

  const badEnv = spawnSync(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: 'eighty' },
    encoding: 'utf8',
    timeout: 20_000,
  })
  t.equal(badEnv.status, 2)
  t.match(badEnv.stderr, /PORT: must be a whole number/)

  const redisNoSecret = spawnSync(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', METRICS_PORT: '0', REDIS_URL: 'redis://127.0.0.1:6379' },
    encoding: 'utf8',
    timeout: 20_000,
  })
  t.equal(redisNoSecret.status, 2, 'Redis without a shared key secret is refused')
  t.match(redisNoSecret.stderr, /TOLLGATE_KEY_SECRET/)
})

t.test('the embedded store keeps keys, files and usage across a restart', async (t) => {
  const first = await startTollgate()
  const { key, id } = await first.createKey({ name: 'survivor' })
  const call = (url: string) =>
    fetch(`${url}/v2/embeddings`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'text-embedding-bge-m3', input: 'persist me' }),
    })
  t.equal((await call(first.url)).status, 200)
  t.equal(await first.stop(), 0)

  const second = await startTollgate({ dataDir: first.dataDir, adminToken: first.adminToken })
  t.teardown(() => second.stop())
  t.equal((await call(second.url)).status, 200, 'the key still works')
  const usage = await fetch(`${second.url}/admin/keys/${id}/usage`, {
    headers: { authorization: `Bearer ${second.adminToken}` },
  })
  const body = (await usage.json()) as { totals: { requests: number } }
  t.equal(body.totals.requests, 2, 'usage from before the restart was kept (flushed at shutdown)')
})

t.test(
  "uploads a crashed gateway left in the spool are removed at the next start; a live one's are kept",
  async (t) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tg-spool-'))
    const spool = join(dataDir, 'spool')
    mkdirSync(spool, { recursive: true })
    // A process that is gone: spawn one and wait for it to exit.
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' })
    const deadPid = Number(gone.stdout)
    const stale = join(spool, `upload-${deadPid}-0f0e0d0c-0b0a-4908-8706-050403020100`)
    const legacy = join(spool, 'upload-5f2c3e44-9a1b-4c55-8f0e-1d2c3b4a5968')
    const live = join(spool, `upload-${process.pid}-1f0e0d0c-0b0a-4908-8706-050403020100`)
    for (const file of [stale, legacy, live]) writeFileSync(file, 'half an upload')
    const gw = await startTollgate({ dataDir })
    t.teardown(() => gw.stop())
    t.notOk(existsSync(stale), 'the upload of a process that is gone was removed')
    t.notOk(existsSync(legacy), 'and one of an older naming')
    t.ok(existsSync(live), 'the upload of a process that still runs (another gateway on this data directory) was kept')
    t.ok(
      gw.logs().some((l) => l.msg?.toString().startsWith('removed uploads left in the spool') && l.files === 2),
      'and the start log says how many',
    )
  },
)
