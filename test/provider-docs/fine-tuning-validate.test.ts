// Issue 27, item 4: the provider's fine-tuning guide runs unchanged against Tollgate as `npm
// start` starts it. The guide is telekom/aifoundation-docs,
// src/content/docs/v1/guides/fine-tuning.mdx: the openai SDK with base_url
// OPENAI_BASE_URL (…/v2), and its "Validate Dataset" step in httpx: GET
// {OPENAI_BASE_URL}/files/validate/{file_id} with the key in an `api-key` header (and a
// Content-Type, on a GET without a body). Each step names its section.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { startBehindUpstream } from '../helpers/gateway.ts'
import { sdkClient, startKeyedGateway } from '../helpers/sdk-gateway.ts'
import { rejectsWith } from '../helpers/assert.ts'

interface Validation {
  id: string
  object: string
  valid: boolean
  examples: number
  error_count: number
  errors: Array<{ line: number; code: string; message: string }>
  message: string
}

/** The guide's "Dataset Format" example, one example per line as JSONL. */
const EXAMPLE = {
  messages: [
    { role: 'system', content: 'Marv is a factual chatbot that is also sarcastic.' },
    { role: 'user', content: 'What is the capital of France?' },
    { role: 'assistant', content: 'Paris', weight: 0 },
    { role: 'user', content: 'Can you be more sarcastic?' },
    { role: 'assistant', content: 'Paris, as if everyone did not know that already.', weight: 1 },
  ],
}
const DATASET = `${JSON.stringify(EXAMPLE)}\n${JSON.stringify({
  messages: [
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello.' },
  ],
})}\n`

const { gw, key } = await startKeyedGateway(t, { name: 'fine-tuning', owner: 'ft-team' })
// "Setup": base_url=os.getenv("OPENAI_BASE_URL"), the /v2 API.
const base = `${gw.url}/v2`
const client = sdkClient(gw, key)

/** "Validate Dataset": httpx.Client().get(url, headers=headers), headers as the guide sets them. */
async function validate(
  fileId: string,
  apiKey = key,
): Promise<{ status: number; body: Validation & { error?: { code: string; message: string }; detail?: string } }> {
  const url = `${base}/files/validate/${fileId}`
  const headers = { 'Content-Type': 'application/json', 'api-key': apiKey }
  const response = await fetch(url, { headers })
  return {
    status: response.status,
    body: (await response.json()) as Validation & { error?: { code: string; message: string }; detail?: string },
  }
}

t.test('the guide: upload, list, validate, create a job, follow it, cancel it, delete the file', async (t) => {
  // "Upload Training Data".
  const uploaded = await client.files.create({
    file: await toFile(Buffer.from(DATASET), 'your_dataset.jsonl'),
    purpose: 'fine-tune',
  })
  t.match(uploaded.id, /^file-/)

  // "List Uploaded Files".
  const files = await client.files.list({ purpose: 'fine-tune' })
  t.ok(
    files.data.some(
      (f) => f.id === uploaded.id && f.filename === 'your_dataset.jsonl' && typeof f.created_at === 'number',
    ),
    'listed with id, filename, created_at',
  )

  // "Validate Dataset".
  const checked = await validate(uploaded.id)
  t.equal(checked.status, 200)
  t.match(checked.body, {
    id: uploaded.id,
    object: 'file.validation',
    valid: true,
    examples: 2,
    error_count: 0,
    errors: [],
  })
  t.match(checked.body.message, /valid/)

  // "Create a Fine-Tuning Job" with the validated file, "List", "Monitor Job Events", "Cancel a Job".
  const job = await client.fineTuning.jobs.create({
    training_file: uploaded.id,
    model: 'Llama-3.3-70B-Instruct',
    hyperparameters: { n_epochs: 2 },
  })
  t.match(job, { object: 'fine_tuning.job', model: 'Llama-3.3-70B-Instruct', training_file: uploaded.id })
  const jobs = await client.fineTuning.jobs.list({ limit: 10 })
  t.ok(
    jobs.data.some((j) => j.id === job.id && typeof j.status === 'string'),
    'listed with id, model, status',
  )
  const events = await client.fineTuning.jobs.listEvents(job.id, { limit: 10 })
  t.ok(
    events.data.every(
      (e) => typeof e.created_at === 'number' && typeof e.level === 'string' && typeof e.message === 'string',
    ),
    'events with created_at, level, message',
  )
  const cancelled = await client.fineTuning.jobs.cancel(job.id)
  t.equal(cancelled.id, job.id)
  // The tests' mock steps a job every 50 ms: it may have finished before the cancel.
  t.ok(['cancelled', 'succeeded'].includes(cancelled.status), `cancelled (or already done): ${cancelled.status}`)

  // "Delete a File".
  t.match(await client.files.delete(uploaded.id), { id: uploaded.id, deleted: true })
  t.equal((await validate(uploaded.id)).status, 404, 'a deleted file cannot be validated')
})

t.test('an invalid dataset: valid false, each problem by line, all counted', async (t) => {
  const lines = [
    JSON.stringify(EXAMPLE),
    '{"messages": [',
    JSON.stringify({ prompt: 'old completion format', completion: 'x' }),
    JSON.stringify({ messages: [{ role: 'user', content: 'no answer' }] }),
    JSON.stringify({
      messages: [
        { role: 'robot', content: 'x' },
        { role: 'assistant', content: 'y' },
      ],
    }),
    JSON.stringify({
      messages: [
        { role: 'user', content: 'x', weight: 1 },
        { role: 'assistant', content: 'y' },
      ],
    }),
    JSON.stringify({
      messages: [
        { role: 'user', content: '' },
        { role: 'assistant', content: 'y' },
      ],
    }),
    JSON.stringify({
      messages: [
        { role: 'user', content: 'x', mood: 'happy' },
        { role: 'assistant', content: 'y' },
      ],
    }),
    JSON.stringify({
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: 'y', weight: 2 },
      ],
    }),
    '[1, 2]',
    '',
    JSON.stringify({
      messages: [
        { role: 'user', content: 'x' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }],
        },
      ],
    }),
  ]
  const file = await client.files.create({
    file: await toFile(Buffer.from(`${lines.join('\r\n')}\r\n`), 'broken.jsonl'),
    purpose: 'fine-tune',
  })
  const { status, body } = await validate(file.id)
  t.equal(status, 200, 'a verdict, not an error')
  t.equal(body.valid, false)
  t.same(
    body.errors.map((e) => [e.line, e.code]),
    [
      [2, 'invalid_json'],
      [3, 'missing_messages'],
      [4, 'missing_assistant_message'],
      [5, 'unrecognized_role'],
      [6, 'invalid_weight'],
      [7, 'missing_content'],
      [8, 'unrecognized_key'],
      [9, 'invalid_weight'],
      [10, 'not_an_object'],
    ],
    'the problems by line (CRLF lines; a blank line and a tool call are fine)',
  )
  t.equal(body.error_count, 9)
  t.equal(body.examples, 11, 'every non-blank line is an example')
  t.notMatch(JSON.stringify(body), /robot|mood|happy|old completion/, 'nothing of the file is echoed')

  const many = await client.files.create({
    file: await toFile(Buffer.from('not json\n'.repeat(50)), 'many.jsonl'),
    purpose: 'fine-tune',
  })
  const manyChecked = (await validate(many.id)).body
  t.equal(manyChecked.error_count, 50, 'all counted')
  t.equal(manyChecked.errors.length, 20, 'the first 20 listed')
  t.equal(manyChecked.errors.at(-1)?.line, 20)

  const binary = await client.files.create({
    file: await toFile(Buffer.from([0x50, 0x4b, 0x03, 0x04, 0xff, 0xfe, 0x00]), 'docs.zip'),
    purpose: 'fine-tune',
  })
  t.match(
    (await validate(binary.id)).body,
    { valid: false, errors: [{ code: 'not_utf8' }] },
    'a ZIP of documents is not a JSONL dataset',
  )
  const empty = await client.files.create({
    file: await toFile(Buffer.from('\n\n'), 'empty.jsonl'),
    purpose: 'fine-tune',
  })
  t.match((await validate(empty.id)).body, { valid: false, examples: 0, errors: [{ line: 0, code: 'empty_file' }] })
})

t.test("refused: no key, a wrong key, two keys, an unknown file, another owner's file", async (t) => {
  const file = await client.files.create({
    file: await toFile(Buffer.from(DATASET), 'mine.jsonl'),
    purpose: 'fine-tune',
  })
  const noKey = await fetch(`${base}/files/validate/${file.id}`)
  t.equal(noKey.status, 401)
  const wrong = await validate(file.id, 'tg1_not_a_real_key')
  t.equal(wrong.status, 401)
  t.equal(wrong.body.detail, wrong.body.error?.message, 'detail beside error, as every error has')
  const bearer = await fetch(`${base}/files/validate/${file.id}`, { headers: { authorization: `Bearer ${key}` } })
  t.equal(bearer.status, 200, 'a Bearer key works too')
  const two = await fetch(`${base}/files/validate/${file.id}`, {
    headers: { authorization: `Bearer ${key}`, 'api-key': (await gw.createKey({ tier: 'Standard4000' })).key },
  })
  t.equal(two.status, 401, 'two different keys are refused')
  t.equal((await validate('file-does-not-exist')).status, 404)

  const stranger = (await gw.createKey({ owner: 'someone-else', tier: 'Standard4000' })).key
  const theirs = await validate(file.id, stranger)
  t.equal(theirs.status, 404, "another owner's file does not exist for them")
  t.equal(theirs.body.error?.code, 'not_found')
  t.notMatch(JSON.stringify(theirs.body), /mine\.jsonl|examples/, 'and nothing of it shows')
  await rejectsWith(
    t,
    new OpenAI({ apiKey: stranger, baseURL: base, maxRetries: 0 }).files.retrieve(file.id),
    404,
    'as with GET /v2/files/{id}',
  )

  const onV1 = await fetch(`${gw.url}/v1/files/validate/${file.id}`, { headers: { 'api-key': key } })
  t.equal(onV1.status, 200, 'the same route under /v1, where the same files are')
})

t.test(
  "through the openai adapter: the upstream gets /files/validate/{id} with the gateway's credentials only",
  async (t) => {
    const behind = await startBehindUpstream()
    const { gw: front, upstream } = behind
    t.teardown(() => behind.stop())
    const frontKey = (await front.createKey({ tier: 'Standard4000' })).key
    const uploaded = await new OpenAI({ apiKey: frontKey, baseURL: `${front.url}/v2`, maxRetries: 0 }).files.create({
      file: await toFile(Buffer.from(DATASET), 'd.jsonl'),
      purpose: 'fine-tune',
    })
    const res = await fetch(`${front.url}/v2/files/validate/${uploaded.id}`, {
      headers: { 'Content-Type': 'application/json', 'api-key': frontKey },
    })
    t.equal(res.status, 200)
    t.match(await res.json(), { id: uploaded.id, valid: true, examples: 2 })
    const seen = (await upstream.requests()).filter((r) => r.path.startsWith('/v1/files/validate/'))
    t.same(
      seen.map((r) => `${r.method} ${r.path}`),
      [`GET /v1/files/validate/${uploaded.id}`],
    )
    t.equal(seen[0]?.headers['api-key'], undefined, "the client's api-key stays with the gateway")
  },
)
