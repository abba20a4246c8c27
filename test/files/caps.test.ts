// Files are bounded per key (storageCaps.files and .fileBytes, per tier), the way an
// attacker would try to pass them: uploads past the count cap, many at once, under both
// /v1/files and /v2/files (one store), one larger than the whole byte cap. Refusals are
// 429 file_quota_exceeded (no retry hint: waiting frees nothing) in the contract's shape;
// another key is unaffected; a delete (by another key of the same owner, too) frees room.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { encodeMultipart } from '../helpers/multipart.ts'

const plans = parse(readFileSync(join(resolve(import.meta.dirname, '../..'), 'config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}

let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate({
    config: (doc) => {
      const tiers = structuredClone(plans.tiers)
      // Basic: 3 files of at most 10,000 bytes in all.
      tiers.Basic = { ...tiers.Basic, storageCaps: { files: 3, fileBytes: 10_000 } }
      doc.plans = { defaultTier: 'Basic', tiers }
    },
  })
})
t.teardown(() => gw.stop())

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: {
    id?: string
    bytes?: number
    deleted?: boolean
    data?: Array<{ id: string }>
    error?: { message: string; type: string; param: string | null; code: string | null }
  }
}

async function upload(key: string, bytes: number, prefix = '/v1'): Promise<Reply> {
  const { contentType, bytes: body } = encodeMultipart([
    { name: 'purpose', value: 'assistants' },
    { name: 'file', filename: 'notes.txt', data: Buffer.alloc(bytes, 'a') },
  ])
  const res = await fetch(`${gw.url}${prefix}/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': contentType },
    body,
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply['body'] }
}

async function remove(key: string, id: string): Promise<Reply> {
  const res = await fetch(`${gw.url}/v1/files/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply['body'] }
}

t.test('a key uploads up to its file count cap; past it, 429 file_quota_exceeded; a delete frees room', async (t) => {
  const mallory = (await gw.createKey({ owner: 'mallory', tier: 'Basic' })).key
  const mallory2 = (await gw.createKey({ owner: 'mallory', tier: 'Basic' })).key
  const bob = (await gw.createKey({ owner: 'bob', tier: 'Basic' })).key

  // Many at once: the room is held before each upload goes upstream, so none slips past.
  const burst = await Promise.all(
    Array.from({ length: 10 }, (_, i) => upload(mallory, 100, i % 2 === 0 ? '/v1' : '/v2')),
  )
  t.equal(burst.filter((r) => r.status === 200).length, 3, 'exactly the cap is stored')
  const refused = burst.find((r) => r.status === 429)
  t.same(Object.keys(refused?.body.error ?? {}).sort(), ['code', 'message', 'param', 'type'])
  t.equal(refused?.body.error?.code, 'file_quota_exceeded')
  t.equal(refused?.body.error?.type, 'insufficient_quota')
  t.match(refused?.body.error?.message, /keeps 3 files, its cap \(3\)/)
  t.equal(refused?.headers.get('retry-after'), null, 'no retry hint: waiting frees nothing')
  t.equal(refused?.headers.get('x-should-retry'), 'false', 'SDKs do not upload the same bytes again')
  t.ok(refused?.headers.has('x-ratelimit-limit-requests'), "the refusal carries the key's limit headers")
  const listed = await fetch(`${gw.url}/v1/files`, { headers: { authorization: `Bearer ${mallory}` } })
  t.equal(((await listed.json()) as Reply['body']).data?.length, 3, 'nothing refused reached the upstream')

  t.equal((await upload(bob, 100)).status, 200, 'another key is unaffected')

  const stored = burst.filter((r) => r.status === 200).map((r) => r.body.id ?? '')
  t.equal((await remove(mallory2, stored[0] ?? '')).status, 200, 'another key of the owner deletes one')
  t.equal((await upload(mallory, 100, '/v2')).status, 200, 'its share went back to the key that uploaded it')
  t.equal((await upload(mallory, 100)).status, 429)
})

t.test('the byte cap counts what is stored; a file larger than the whole cap is 413', async (t) => {
  const carol = (await gw.createKey({ owner: 'carol', tier: 'Basic' })).key
  const first = await upload(carol, 6_000)
  t.equal(first.status, 200)
  const over = await upload(carol, 6_000)
  t.equal(over.status, 429)
  t.equal(over.body.error?.code, 'file_quota_exceeded')
  t.match(over.body.error?.message, /cap \(10000 bytes\)/)
  t.equal((await upload(carol, 3_000)).status, 200, 'a smaller file still fits')
  const never = await upload(carol, 20_000)
  t.equal(never.status, 413)
  t.equal(never.body.error?.code, 'request_too_large')
  t.equal((await remove(carol, first.body.id ?? '')).status, 200)
  t.equal((await upload(carol, 6_000)).status, 200, 'deleting gave the bytes back')
})
