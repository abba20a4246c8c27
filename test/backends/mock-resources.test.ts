// The mock's files and fine-tuning jobs. Job progress is read off the clock, so most of
// these tests drive a hand-held clock; one runs on the real clock with a tiny step.
import t from 'tap'
import type OpenAI from 'openai'
import { text as readText } from 'node:stream/consumers'
import type { Endpoint, MockBackendConfig } from '../../src/config/schema.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import type { RequestBody } from '../../src/http/body.ts'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import { multipartBody } from '../helpers/multipart.ts'
import { client, type OpenAIErrorBody } from './mock-helpers.ts'

const STEP_MS = 1_000
const CONFIG: MockBackendConfig = {
  type: 'mock',
  tokensPerSecond: 1000,
  defaultCompletionTokens: 24,
  fineTuneStepMs: STEP_MS,
}

function call(
  endpoint: Endpoint,
  method: UpstreamRequest['method'],
  path: string,
  body: RequestBody = { kind: 'none' },
): UpstreamRequest {
  return {
    endpoint,
    method,
    path,
    model: null,
    requestId: 'req-res',
    body,
    signal: new AbortController().signal,
    client,
  }
}

async function json<T>(response: UpstreamResponse, status = 200): Promise<T> {
  const body = await readText(response.body)
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${body}`)
  if (response.headers['content-type'] !== 'application/json')
    throw new Error(`not JSON: ${response.headers['content-type']}`)
  return JSON.parse(body) as T
}

interface ListOf<T> {
  object: 'list'
  data: T[]
  has_more: boolean
  first_id?: string | null
  last_id?: string | null
}

async function upload(
  backend: BackendAdapter,
  dir: string,
  name: string,
  bytes: number,
  purpose = 'fine-tune',
): Promise<OpenAI.FileObject> {
  const body = await multipartBody(
    [
      { name: 'purpose', value: purpose },
      { name: 'file', filename: name, data: Buffer.alloc(bytes, 0x61), contentType: 'application/jsonl' },
    ],
    dir,
  )
  return json<OpenAI.FileObject>(await backend.send(call('files.create', 'POST', '/files', body)))
}

t.test('files: upload, list, retrieve, delete, and 404 once gone', async (t) => {
  const backend = createMockBackend('mock', CONFIG)
  const first = await upload(backend, t.testdir(), 'train.jsonl', 1234)
  t.match(first.id, /^file-[A-Za-z0-9]+$/)
  t.same(
    { ...first, id: 'x', created_at: 0 },
    {
      id: 'x',
      object: 'file',
      bytes: 1234,
      created_at: 0,
      expires_at: null,
      filename: 'train.jsonl',
      purpose: 'fine-tune',
      status: 'processed',
      status_details: null,
    },
  )
  t.ok(Math.abs(first.created_at - Date.now() / 1000) < 600)
  const second = await upload(backend, t.testdir(), 'batch.jsonl', 10, 'batch')

  const list = await json<ListOf<OpenAI.FileObject>>(await backend.send(call('files.list', 'GET', '/files')))
  t.equal(list.object, 'list')
  t.equal(list.has_more, false)
  t.same(
    list.data.map((f) => f.id),
    [second.id, first.id],
    'newest first',
  )
  t.same([list.first_id, list.last_id], [second.id, first.id])
  const asc = await json<ListOf<OpenAI.FileObject>>(await backend.send(call('files.list', 'GET', '/files?order=asc')))
  t.same(
    asc.data.map((f) => f.id),
    [first.id, second.id],
  )
  const byPurpose = await json<ListOf<OpenAI.FileObject>>(
    await backend.send(call('files.list', 'GET', '/files?purpose=batch')),
  )
  t.same(
    byPurpose.data.map((f) => f.id),
    [second.id],
  )
  const paged = await json<ListOf<OpenAI.FileObject>>(await backend.send(call('files.list', 'GET', '/files?limit=1')))
  t.same([paged.data.map((f) => f.id), paged.has_more], [[second.id], true])
  const next = await json<ListOf<OpenAI.FileObject>>(
    await backend.send(call('files.list', 'GET', `/files?limit=1&after=${second.id}`)),
  )
  t.same([next.data.map((f) => f.id), next.has_more], [[first.id], false])

  // Retrieving one file arrives under the list endpoint: the path decides.
  t.same(await json<OpenAI.FileObject>(await backend.send(call('files.list', 'GET', `/files/${first.id}`))), first)

  const deleted = await json<OpenAI.FileDeleted>(
    await backend.send(call('files.delete', 'DELETE', `/files/${first.id}`)),
  )
  t.same(deleted, { id: first.id, object: 'file', deleted: true })
  for (const request of [
    call('files.list', 'GET', `/files/${first.id}`),
    call('files.delete', 'DELETE', `/files/${first.id}`),
  ]) {
    const gone = await json<OpenAIErrorBody>(await backend.send(request), 404)
    t.equal(gone.error.type, 'invalid_request_error')
    t.equal(gone.error.message, `No such File object: ${first.id}`)
  }
  const hostile = await json<OpenAIErrorBody>(await backend.send(call('files.list', 'GET', '/files/%3Cscript%3E')), 404)
  t.notMatch(hostile.error.message, /<script>/, 'odd ids are not echoed')
  const list2 = await json<ListOf<OpenAI.FileObject>>(await backend.send(call('files.list', 'GET', '/files')))
  t.same(
    list2.data.map((f) => f.id),
    [second.id],
  )
  await backend.close()
})

t.test('files: refusals', async (t) => {
  const backend = createMockBackend('mock', CONFIG)
  const noFile = await multipartBody([{ name: 'purpose', value: 'fine-tune' }], t.testdir())
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.create', 'POST', '/files', noFile)), 400)).error.param,
    'file',
  )
  const noPurpose = await multipartBody([{ name: 'file', filename: 'a', data: Buffer.from('x') }], t.testdir())
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.create', 'POST', '/files', noPurpose)), 400)).error
      .param,
    'purpose',
  )
  const badPurpose = await multipartBody(
    [
      { name: 'purpose', value: 'fun' },
      { name: 'file', filename: 'a', data: Buffer.from('x') },
    ],
    t.testdir(),
  )
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.create', 'POST', '/files', badPurpose)), 400)).error
      .param,
    'purpose',
  )
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.list', 'GET', '/files?limit=0')), 400)).error.param,
    'limit',
  )
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.list', 'GET', '/files?after=file-nope')), 400)).error
      .param,
    'after',
  )
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.content', 'GET', '/files/a/content')), 404)).error
      .param,
    'id',
    'content of a file that does not exist',
  )
  t.equal(
    (await json<OpenAIErrorBody>(await backend.send(call('files.list', 'GET', '/files/a/other')), 404)).error.code,
    'unknown_url',
  )
  await backend.close()
})

t.test('fine-tuning: queued, running, succeeded, one step each, with an event per transition', async (t) => {
  let now = 1_700_000_000_000
  const backend = createMockBackend('mock', CONFIG, { now: () => now })
  const file = await upload(backend, t.testdir(), 'train.jsonl', 4000)
  const create = (value: Record<string, unknown>): UpstreamRequest =>
    call('fine_tuning.jobs.create', 'POST', '/fine_tuning/jobs', { kind: 'json', value })

  const job = await json<OpenAI.FineTuning.FineTuningJob>(
    await backend.send(create({ model: 'gpt-4o-mini', training_file: file.id, suffix: 'custom' })),
  )
  t.match(job.id, /^ftjob-/)
  t.same(
    [job.object, job.status, job.model, job.training_file, job.fine_tuned_model, job.finished_at, job.trained_tokens],
    ['fine_tuning.job', 'queued', 'gpt-4o-mini', file.id, null, null, null],
  )
  t.equal(job.created_at, now / 1000)
  t.equal(job.estimated_finish, (now + 2 * STEP_MS) / 1000)
  t.same(job.hyperparameters, { batch_size: 'auto', learning_rate_multiplier: 'auto', n_epochs: 'auto' })
  t.equal(job.method?.type, 'supervised')
  const retrieve = async (): Promise<OpenAI.FineTuning.FineTuningJob> =>
    json<OpenAI.FineTuning.FineTuningJob>(
      await backend.send(call('fine_tuning.jobs.list', 'GET', `/fine_tuning/jobs/${job.id}`)),
    )
  const events = async (query = ''): Promise<ListOf<OpenAI.FineTuning.FineTuningJobEvent>> =>
    json<ListOf<OpenAI.FineTuning.FineTuningJobEvent>>(
      await backend.send(call('fine_tuning.jobs.events', 'GET', `/fine_tuning/jobs/${job.id}/events${query}`)),
    )

  t.equal((await events()).data.length, 2, 'created and validating')
  now += STEP_MS - 1
  t.equal((await retrieve()).status, 'queued', 'still queued just before the step')
  now += 1
  t.equal((await retrieve()).status, 'running')
  t.equal((await events()).data[0]?.message, 'Fine-tuning job started', 'newest event first')
  now += STEP_MS
  const done = await retrieve()
  t.equal(done.status, 'succeeded')
  t.equal(done.fine_tuned_model, `ft:gpt-4o-mini:tollgate-mock:custom:${job.id.slice(-8)}`)
  t.equal(done.finished_at, now / 1000)
  t.equal(done.trained_tokens, 3 * 1000, '4000 bytes at 4 bytes a token, 3 epochs')
  t.equal(done.estimated_finish, null)
  now += 10 * STEP_MS
  t.same(await retrieve(), done, 'nothing changes after success')

  const all = await events()
  t.same(
    all.data.map((e) => e.message),
    [
      'The job has successfully completed',
      `New fine-tuned model created: ${done.fine_tuned_model}`,
      'Fine-tuning job started',
      `Validating training file: ${file.id}`,
      `Created fine-tuning job: ${job.id}`,
    ],
  )
  t.ok(all.data.every((e) => e.object === 'fine_tuning.job.event' && e.level === 'info' && /^ftevent-/.test(e.id)))
  t.equal(new Set(all.data.map((e) => e.id)).size, 5, 'distinct event ids')
  const page = await events('?limit=2')
  t.same([page.data.map((e) => e.id), page.has_more], [all.data.slice(0, 2).map((e) => e.id), true])
  const rest = await events(`?limit=10&after=${page.data[1]?.id}`)
  t.same(
    [rest.data.map((e) => e.id), rest.has_more],
    [all.data.slice(2).map((e) => e.id), false],
    'event ids are stable cursors',
  )

  const cancelLate = await json<OpenAI.FineTuning.FineTuningJob>(
    await backend.send(call('fine_tuning.jobs.cancel', 'POST', `/fine_tuning/jobs/${job.id}/cancel`)),
  )
  t.equal(cancelLate.status, 'succeeded', 'a finished job is not cancelled')
  t.equal((await events()).data.length, 5, 'and gets no cancel event')
  await backend.close()
})

t.test('fine-tuning: cancel a running job; list newest first with limit', async (t) => {
  let now = 1_700_000_000_000
  const backend = createMockBackend('mock', CONFIG, { now: () => now })
  const file = await upload(backend, t.testdir(), 'train.jsonl', 100)
  const create = async (): Promise<OpenAI.FineTuning.FineTuningJob> =>
    json<OpenAI.FineTuning.FineTuningJob>(
      await backend.send(
        call('fine_tuning.jobs.create', 'POST', '/fine_tuning/jobs', {
          kind: 'json',
          value: {
            model: 'm',
            training_file: file.id,
            method: { type: 'supervised', supervised: { hyperparameters: { n_epochs: 2 } } },
          },
        }),
      ),
    )
  const first = await create()
  now += 1
  const second = await create()
  now += 1
  const third = await create()
  t.equal(third.hyperparameters.n_epochs, 2)

  now += STEP_MS
  const cancelled = await json<OpenAI.FineTuning.FineTuningJob>(
    await backend.send(call('fine_tuning.jobs.cancel', 'POST', `/fine_tuning/jobs/${second.id}/cancel`)),
  )
  t.equal(cancelled.status, 'cancelled')
  now += 10 * STEP_MS
  const later = await json<OpenAI.FineTuning.FineTuningJob>(
    await backend.send(call('fine_tuning.jobs.list', 'GET', `/fine_tuning/jobs/${second.id}`)),
  )
  t.same([later.status, later.fine_tuned_model, later.trained_tokens], ['cancelled', null, null], 'stays cancelled')
  const events = await json<ListOf<OpenAI.FineTuning.FineTuningJobEvent>>(
    await backend.send(call('fine_tuning.jobs.events', 'GET', `/fine_tuning/jobs/${second.id}/events`)),
  )
  t.same(events.data.map((e) => e.message).slice(0, 2), ['The job was cancelled', 'Fine-tuning job started'])
  t.notOk(
    events.data.some((e) => /successfully/.test(e.message)),
    'never completes',
  )

  const list = await json<ListOf<OpenAI.FineTuning.FineTuningJob>>(
    await backend.send(call('fine_tuning.jobs.list', 'GET', '/fine_tuning/jobs')),
  )
  t.same(
    list.data.map((j) => j.id),
    [third.id, second.id, first.id],
    'newest first',
  )
  t.same(
    list.data.map((j) => j.status),
    ['succeeded', 'cancelled', 'succeeded'],
  )
  t.equal(list.has_more, false)
  const limited = await json<ListOf<OpenAI.FineTuning.FineTuningJob>>(
    await backend.send(call('fine_tuning.jobs.list', 'GET', '/fine_tuning/jobs?limit=2')),
  )
  t.same([limited.data.map((j) => j.id), limited.has_more], [[third.id, second.id], true])
  await backend.close()
})

t.test('fine-tuning: refusals and unknown jobs', async (t) => {
  const backend = createMockBackend('mock', CONFIG)
  const batch = await upload(backend, t.testdir(), 'b.jsonl', 10, 'batch')
  const training = await upload(backend, t.testdir(), 't.jsonl', 10)
  const create = (value: Record<string, unknown>): UpstreamRequest =>
    call('fine_tuning.jobs.create', 'POST', '/fine_tuning/jobs', { kind: 'json', value })
  for (const [value, param, code] of [
    [{ training_file: 'file-x' }, 'model', 'missing_required_parameter'],
    [{ model: 'm' }, 'training_file', 'missing_required_parameter'],
    [{ model: 'm', training_file: 'file-unknown' }, 'training_file', 'invalid_file'],
    [{ model: 'm', training_file: batch.id }, 'training_file', 'invalid_file_purpose'],
    [{ model: 'm', training_file: training.id, method: { type: 'dpo' } }, 'method.type', 'unsupported_value'],
    [{ model: 'm', training_file: training.id, hyperparameters: { n_epochs: 0 } }, 'n_epochs', 'invalid_value'],
    [{ model: 'm', training_file: training.id, suffix: 'x'.repeat(65) }, 'suffix', 'invalid_value'],
    [{ model: 'm', training_file: training.id, validation_file: 'file-unknown' }, 'validation_file', 'invalid_file'],
  ] as const) {
    const body = await json<OpenAIErrorBody>(await backend.send(create(value)), 400)
    t.same([body.error.param, body.error.code], [param, code])
  }
  for (const request of [
    call('fine_tuning.jobs.list', 'GET', '/fine_tuning/jobs/ftjob-nope'),
    call('fine_tuning.jobs.cancel', 'POST', '/fine_tuning/jobs/ftjob-nope/cancel'),
    call('fine_tuning.jobs.events', 'GET', '/fine_tuning/jobs/ftjob-nope/events'),
  ]) {
    const body = await json<OpenAIErrorBody>(await backend.send(request), 404)
    t.equal(body.error.message, 'No such fine-tuning job: ftjob-nope')
  }
  await backend.close()
})

t.test('fine-tuning on the real clock with a tiny step reaches succeeded', async (t) => {
  const backend = createMockBackend('mock', { ...CONFIG, fineTuneStepMs: 5 })
  const file = await upload(backend, t.testdir(), 'train.jsonl', 100)
  const job = await json<OpenAI.FineTuning.FineTuningJob>(
    await backend.send(
      call('fine_tuning.jobs.create', 'POST', '/fine_tuning/jobs', {
        kind: 'json',
        value: { model: 'm', training_file: file.id },
      }),
    ),
  )
  t.equal(job.status, 'queued')
  let latest = job
  for (let i = 0; i < 200 && latest.status !== 'succeeded'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 2))
    latest = await json<OpenAI.FineTuning.FineTuningJob>(
      await backend.send(call('fine_tuning.jobs.list', 'GET', `/fine_tuning/jobs/${job.id}`)),
    )
  }
  t.equal(latest.status, 'succeeded')
  t.match(latest.fine_tuned_model, /^ft:m:tollgate-mock::/)
  await backend.close()
})
