// Asynchronous /queue requests (Prefer: respond-async) on the embedded store: 202 and
// Location, polling to the result (the body /v2 gives for the same input), who may read
// and cancel, lists, cancelling queued and running requests (the upstream sees the
// abort; the tokens so far are charged), stored multipart bodies and their limit, a key
// revoked while its request waited, and requests that outlive a restart.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { adminCall } from '../admin/helpers.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { request } from '../helpers/http.ts'
import { encodeMultipart } from '../helpers/multipart.ts'
import {
  ASYNC,
  chatBody,
  del,
  embeddedGateway,
  get,
  masked,
  MODEL,
  post,
  sleep,
  until,
  type QueueView,
} from './helpers.ts'

const upstream = await startFakeUpstream({
  replyText: Array.from({ length: 60 }, (_, i) => `word${i}`).join(' '),
  eventDelayMs: 80,
})
t.teardown(() => upstream.close())

const gw = await embeddedGateway(t, {
  windowMs: 4000,
  queue: { maxBodyBytes: 4096 },
  config: (doc) => {
    ;(doc.backends as Record<string, unknown>).fake = { type: 'openai', baseUrl: upstream.url }
    ;(doc.models as unknown[]).push({ name: 'slow-model', kind: 'chat', deployments: [{ backend: 'fake' }] })
  },
})
const admin = adminCall(gw.url, gw.adminToken)
const newKey = async (body: Record<string, unknown> = {}): Promise<{ id: string; key: string }> =>
  gw.createKey({ tier: 'Standard4000', ...body })
const queued = `${gw.url}/queue/chat/completions`
const requestUrl = (id: string): string => `${gw.url}/queue/requests/${id}`

t.test('202 with Location; polling reaches completed with the body /v2 gives for the same input', async (t) => {
  const { key } = await newKey()
  const body = chatBody('the same input', { max_tokens: 12 })
  const accepted = await post(queued, key, body, ASYNC)
  t.equal(accepted.status, 202)
  const view = accepted.json<QueueView>()
  t.match(view, { object: 'queue.request', status: 'queued', endpoint: '/chat/completions', model: MODEL })
  t.match(view.id, /^qreq_/)
  t.type(view.created_at, 'number')
  t.equal(accepted.headers.get('location'), `/queue/requests/${view.id}`)
  t.equal(accepted.headers.get('preference-applied'), 'respond-async')
  t.ok(accepted.headers.get('x-ratelimit-limit-requests'), 'limit headers, as on every /queue reply')

  const done = await until(`${gw.url}${accepted.headers.get('location')}`, key, ['completed', 'failed'])
  t.equal(done.status, 'completed')
  t.equal(done.response?.status_code, 200)
  const direct = await post(`${gw.url}/v2/chat/completions`, key, body)
  t.same(masked(done.response?.body), masked(direct.json()), "the body equals /v2's, ids and timestamps aside")
  const usage = direct.json<{ usage: { prompt_tokens: number; completion_tokens: number } }>().usage
  t.same(done.response?.usage, {
    input_tokens: usage.prompt_tokens,
    output_tokens: usage.completion_tokens,
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
  })
  t.equal(done.attempts, 1)
  t.type(done.started_at, 'number')
  t.type(done.completed_at, 'number')
})

t.test(
  'the official SDK: submit with Prefer: respond-async, poll with client.get, cancel with client.delete',
  async (t) => {
    const { key } = await newKey()
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/queue` })
    const accepted = (await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'from the SDK' }], max_tokens: 4 },
      { headers: { Prefer: 'respond-async' } },
    )) as unknown as QueueView
    t.equal(accepted.object, 'queue.request')
    let view = accepted
    for (let i = 0; i < 200 && view.status !== 'completed'; i++) {
      await sleep(50)
      view = await client.get<QueueView>(`/requests/${accepted.id}`)
    }
    t.equal(view.status, 'completed')
    t.equal((view.response?.body as { object?: string }).object, 'chat.completion')
    const list = await client.get<{ data: QueueView[] }>('/requests', { query: { limit: 1 } })
    t.equal(list.data[0]?.id, accepted.id)
    const conflict = await client.delete(`/requests/${accepted.id}`).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(conflict instanceof OpenAI.ConflictError, 'a finished request cannot be cancelled: 409')
  },
)

t.test('only the submitting key or a key of the same owner can read, list and cancel it', async (t) => {
  const mine = await newKey({ owner: 'team-a' })
  const sibling = await newKey({ owner: 'team-a' })
  const stranger = await newKey({ owner: 'team-b' })
  const id = (await post(queued, mine.key, chatBody('private'), ASYNC)).json<QueueView>().id
  await until(requestUrl(id), mine.key, ['completed'])
  t.equal((await get(requestUrl(id), sibling.key)).status, 200, 'a key of the same owner reads it')
  const read = await get(requestUrl(id), stranger.key)
  t.equal(read.status, 404, 'another owner: 404 on read')
  t.equal(read.json().error.code, 'not_found')
  t.equal((await del(requestUrl(id), stranger.key)).status, 404, 'another owner: 404 on cancel')
  t.equal((await get(`${gw.url}/queue/requests/qreq_nothere`, mine.key)).status, 404)
  t.equal((await get(requestUrl(id), 'tg1_not_a_key')).status, 401)
  const theirs = (await get(`${gw.url}/queue/requests`, stranger.key)).json<{ data: QueueView[] }>()
  t.notOk(
    theirs.data.some((r) => r.id === id),
    'nor does it list it',
  )
})

t.test('lists: newest first, paginated with limit and after, filtered by status', async (t) => {
  const { key } = await newKey({ owner: 'lister' })
  const ids: string[] = []
  for (let i = 0; i < 5; i++) ids.push((await post(queued, key, chatBody(`list ${i}`), ASYNC)).json<QueueView>().id)
  for (const id of ids) await until(requestUrl(id), key, ['completed'])
  const first = (await get(`${gw.url}/queue/requests?limit=2`, key)).json<{
    object: string
    data: QueueView[]
    has_more: boolean
    first_id: string
    last_id: string
  }>()
  t.equal(first.object, 'list')
  t.same(
    first.data.map((r) => r.id),
    [ids[4], ids[3]],
  )
  t.ok(first.has_more)
  t.equal(first.last_id, ids[3])
  const rest = (await get(`${gw.url}/queue/requests?limit=10&after=${first.last_id}`, key)).json<{
    data: QueueView[]
    has_more: boolean
  }>()
  t.same(
    rest.data.map((r) => r.id),
    [ids[2], ids[1], ids[0]],
  )
  t.notOk(rest.has_more)
  const completed = (await get(`${gw.url}/queue/requests?status=completed`, key)).json<{ data: QueueView[] }>()
  t.equal(completed.data.length, 5)
  t.equal((await get(`${gw.url}/queue/requests?status=queued`, key)).json<{ data: QueueView[] }>().data.length, 0)
  const bad = await get(`${gw.url}/queue/requests?status=done`, key)
  t.equal(bad.status, 400)
  t.equal((await get(`${gw.url}/queue/requests?limit=1000`, key)).status, 400)
})

t.test('a queued request is cancelled and never runs', async (t) => {
  const { id: keyId, key } = await newKey({ limits: { [MODEL]: { rpm: 1 } } })
  const first = (await post(queued, key, chatBody('runs'), ASYNC)).json<QueueView>().id
  const second = (await post(queued, key, chatBody('waits'), ASYNC)).json<QueueView>().id
  await until(requestUrl(first), key, ['completed'])
  const waiting = (await get(requestUrl(second), key)).json<QueueView>()
  t.equal(waiting.status, 'queued', 'the window is spent: it waits')
  t.equal(waiting.position, 0, 'first in its line')
  const cancelled = await del(requestUrl(second), key)
  t.equal(cancelled.status, 200)
  t.equal(cancelled.json<QueueView>().status, 'cancelled')
  await sleep(4500)
  const after = (await get(requestUrl(second), key)).json<QueueView>()
  t.equal(after.status, 'cancelled', 'still cancelled after the window reset')
  t.equal(after.attempts, 0, 'it never ran')
  t.equal((await del(requestUrl(first), key)).status, 409, 'a completed request cannot be cancelled')
  const usage = (await admin('GET', `/admin/keys/${keyId}/usage`)).json<{ totals: { requests: number } }>()
  t.equal(usage.totals.requests, 1, 'only the first was charged')
})

t.test('a running request is cancelled: the upstream sees the abort and the tokens so far are charged', async (t) => {
  const { key } = await newKey()
  const before = upstream.requests.length
  const id = (
    await post(queued, key, { model: 'slow-model', messages: [{ role: 'user', content: 'long' }], stream: true }, ASYNC)
  ).json<QueueView>().id
  await until(requestUrl(id), key, ['in_progress'])
  await sleep(600)
  const cancelled = await del(requestUrl(id), key)
  t.equal(cancelled.status, 200)
  const view = cancelled.json<QueueView>()
  t.equal(view.status, 'cancelled')
  const sent = upstream.requests[before]
  t.ok(sent, 'the upstream got the call')
  t.equal(await sent?.ended, 'closed', 'and saw it aborted')
  const output = view.response?.usage.output_tokens ?? 0
  t.ok(output > 0 && output < 60, `the tokens streamed before the cancel are charged (${output} of 60)`)
})

t.test('multipart bodies are stored and sent; larger than queue.maxBodyBytes is a 413', async (t) => {
  const { key } = await newKey()
  /** A transcription form with `size` bytes of audio. */
  const audio = (filename: string, size: number) =>
    encodeMultipart([
      { name: 'model', value: 'whisper-large-v3' },
      { name: 'file', filename, data: Buffer.alloc(size, 7), contentType: 'audio/wav' },
    ])
  const transcribe = (form: ReturnType<typeof audio>, headers: Record<string, string>) =>
    request(`${gw.url}/queue/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': form.contentType, ...headers },
      body: form.bytes,
    })
  const accepted = await transcribe(audio('a.wav', 1500), ASYNC)
  t.equal(accepted.status, 202)
  const done = await until(requestUrl(accepted.json<QueueView>().id), key, ['completed', 'failed'])
  t.equal(done.status, 'completed')
  t.match(done.response?.body, { text: /./ }, 'the transcription ran on the stored upload')

  const big = audio('b.wav', 6000)
  const refused = await transcribe(big, ASYNC)
  t.equal(refused.status, 413)
  t.equal(refused.json().error.code, 'request_too_large')
  t.match(refused.json().error.message, /queue\.maxBodyBytes/)
  const dropIn = await transcribe(big, {})
  t.equal(dropIn.status, 200, 'the limit is for stored bodies: a drop-in call may be larger')
})

t.test('a key revoked while its request waited fails the request when its turn comes', async (t) => {
  const { id: keyId, key } = await newKey({ limits: { [MODEL]: { rpm: 1 } } })
  const first = (await post(queued, key, chatBody('one'), ASYNC)).json<QueueView>().id
  const second = (await post(queued, key, chatBody('two'), ASYNC)).json<QueueView>().id
  await until(requestUrl(first), key, ['completed'])
  t.equal((await admin('DELETE', `/admin/keys/${keyId}`)).status, 200)
  const failed = (await admin('GET', `/admin/queue/requests/${second}`)).json<QueueView>()
  t.equal(failed.status, 'queued', 'still waiting for the window')
  let view = failed
  for (let i = 0; i < 150 && view.status === 'queued'; i++) {
    await sleep(50)
    view = (await admin('GET', `/admin/queue/requests/${second}`)).json<QueueView>()
  }
  t.equal(view.status, 'failed')
  t.equal(view.response?.status_code, 401)
  t.match(view.response?.body, { error: { code: 'invalid_api_key', message: /revoked/ } })
})

t.test('Prefer parsing, and refusals answered as on /v2', async (t) => {
  const { key } = await newKey()
  const multi = await post(queued, key, chatBody('x'), { prefer: 'wait=5, respond-async' })
  t.equal(multi.status, 202, 'respond-async among other preferences')
  const sync = await post(queued, key, chatBody('x'), { prefer: 'return=minimal' })
  t.equal(sync.status, 200, 'another preference alone: drop-in')
  const invalid = await post(queued, key, { model: MODEL }, ASYNC)
  t.equal(invalid.status, 400)
  t.equal(invalid.json().error.code, 'missing_required_parameter')
  const unknown = await post(queued, key, { ...chatBody('x'), model: 'no-such-model' }, ASYNC)
  t.equal(unknown.status, 404)
  t.equal((await post(queued, 'tg1_bad', chatBody('x'), ASYNC)).status, 401)
  const narrow = await newKey({ models: ['gpt-4o'] })
  t.equal((await post(queued, narrow.key, chatBody('x'), ASYNC)).status, 403)
  t.equal((await request(`${gw.url}/queue/responses`, { method: 'POST' })).status, 404, '/responses has no /queue twin')
})

t.test('queued requests complete after a restart of the embedded gateway', async (t) => {
  const dataDir = join(mkdtempSync(join(tmpdir(), 'tollgate-queue-restart-')), 'data')
  const settings = {
    windowMs: 3000,
    dataDir,
    config: (doc: Record<string, unknown>) => {
      doc.queue = { retryBackoffMs: 50, sweepIntervalMs: 1000 }
    },
  }
  const first = await startTollgate({
    dataDir,
    config: (doc) => {
      doc.limits = { windowMs: settings.windowMs }
      settings.config(doc)
    },
  })
  const { key } = await first.createKey({ tier: 'Standard4000', limits: { [MODEL]: { rpm: 1 } } })
  const ids: string[] = []
  for (let i = 0; i < 3; i++)
    ids.push(
      (await post(`${first.url}/queue/chat/completions`, key, chatBody(`restart ${i}`), ASYNC)).json<QueueView>().id,
    )
  await until(`${first.url}/queue/requests/${ids[0]}`, key, ['completed'])
  t.equal((await get(`${first.url}/queue/requests/${ids[2]}`, key)).json<QueueView>().status, 'queued')
  t.equal(await first.stop(), 0)

  const second = await startTollgate({
    dataDir,
    adminToken: first.adminToken,
    config: (doc) => {
      doc.limits = { windowMs: settings.windowMs }
      settings.config(doc)
    },
  })
  t.teardown(() => second.stop())
  for (const id of ids) {
    const done = await until(`${second.url}/queue/requests/${id}`, key, ['completed', 'failed'], 20_000)
    t.equal(done.status, 'completed', `${id} completed`)
  }
})
