// The key portal's pages with 1,000 keys (issue #12): each page's weight (HTML, and what
// gzip would make of it; the stylesheet and script are loaded once and cached for good) and
// the time the gateway takes to answer it, one request at a time. The user owns 1,000 keys,
// 20 of which have made a call; an admin's "All keys" lists the same 1,000.
import { gzipSync } from 'node:zlib'
import { startTollgate } from '../test/helpers/gateway.ts'
import { createUser, signInByFetch } from '../test/portal/helpers.ts'
import { quantile } from './proxy-rig.ts'

const KEYS = 1000
const CALLS = 20
const ROUNDS = 20

interface Reading {
  readonly page: string
  readonly bytes: number
  readonly gzip: number
  readonly p50: number
  readonly p95: number
}

export async function benchPortal(): Promise<string> {
  const gw = await startTollgate()
  try {
    const user = await createUser(gw, 'bench', 'bench-password', ['admin'])
    const secrets: string[] = []
    let firstId = ''
    for (let i = 0; i < KEYS; i++) {
      const key = await gw.createKey({ name: `key-${i}`, owner: user.id })
      if (i === 0) firstId = key.id
      if (i < CALLS) secrets.push(key.key)
    }
    for (const secret of secrets) {
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'gpt-oss-120b', messages: [{ role: 'user', content: 'hello' }], max_tokens: 20 }),
      })
      await res.arrayBuffer()
    }
    const session = await signInByFetch(gw.url, 'bench', 'bench-password')
    const pages: Array<[string, string]> = [
      ['Sign in', '/portal/sign-in'],
      ['My keys, page 1 (50 of 1,000)', '/portal/keys'],
      ['My keys, page 20', '/portal/keys?page=20'],
      ['One key: limits of 34 models', `/portal/keys/${firstId}`],
      ['Usage, 30 days, all keys', '/portal/usage'],
      ['Usage CSV', '/portal/usage.csv'],
      ['Admin: all keys, page 1', '/portal/admin/keys'],
      ['Admin: users', '/portal/admin/users'],
    ]
    const readings: Reading[] = []
    for (const [page, path] of pages) {
      const times: number[] = []
      let body = Buffer.alloc(0)
      for (let i = 0; i < ROUNDS; i++) {
        const started = performance.now()
        const res = path === '/portal/sign-in' ? await fetch(`${gw.url}${path}`) : await session.get(path)
        body = Buffer.from(await res.arrayBuffer())
        times.push(performance.now() - started)
        if (res.status !== 200) throw new Error(`${path}: ${res.status}`)
      }
      readings.push({
        page,
        bytes: body.length,
        gzip: gzipSync(body).length,
        p50: quantile(
          times.sort((a, b) => a - b),
          0.5,
        ),
        p95: quantile(times, 0.95),
      })
    }
    const assets = await Promise.all(
      ['portal.css', 'portal.js'].map(async (name) => {
        const bytes = Buffer.from(await (await fetch(`${gw.url}/portal/assets/${name}`)).arrayBuffer())
        return { name, bytes: bytes.length, gzip: gzipSync(bytes).length }
      }),
    )
    const kb = (n: number): string => (n / 1024).toFixed(1)
    return [
      '## Portal pages with 1,000 keys (bench/portal.ts)',
      '',
      `One user owning ${KEYS.toLocaleString('en-US')} keys (${CALLS} of them used once), embedded store; each page fetched ${ROUNDS} times,`,
      'one at a time, signed in. The gateway does not compress: "gzip" is what a compressing proxy in',
      'front would send. Lists show 50 rows a page.',
      '',
      '| Page | HTML KiB | gzip KiB | p50 ms | p95 ms |',
      '|---|---|---|---|---|',
      ...readings.map(
        (r) => `| ${r.page} | ${kb(r.bytes)} | ${kb(r.gzip)} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} |`,
      ),
      '',
      'Loaded once per version and cached for good (`immutable`): ' +
        assets.map((a) => `${a.name} ${kb(a.bytes)} KiB (gzip ${kb(a.gzip)})`).join(', ') +
        '.',
      'No images, fonts or third-party requests; charts are inline SVG in the page.',
    ].join('\n')
  } finally {
    await gw.stop()
  }
}

if (import.meta.main) process.stdout.write(`${await benchPortal()}\n`)
