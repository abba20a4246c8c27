// The provider's Fine-Tuning guide (telekom/aifoundation-docs, src/content/docs/v1/guides/
// fine-tuning.mdx), against the gateway `npm start` runs, in the page's order: setup,
// upload, list, create a job, list jobs, events, cancel, delete. "Validate Dataset"
// (GET /files/validate/{id} with an api-key header) is another engineer's, in its own file
// (see INDEX.md). The page's placeholders ("file-abc123", "ftjob-abc123") are the ids the
// earlier calls returned.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { startDocsGateway } from './docs-gateway.ts'

await startDocsGateway()

// "Setup": OpenAI(api_key=os.getenv("OPENAI_API_KEY"), base_url=os.getenv("OPENAI_BASE_URL")).
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, baseURL: process.env.OPENAI_BASE_URL })

// "Dataset Format": one conversation with weighted assistant turns, one JSON object per line.
const conversation = {
  messages: [
    { role: 'system', content: 'Marv is a factual chatbot that is also sarcastic.' },
    { role: 'user', content: "What's the capital of France?" },
    { role: 'assistant', content: 'Paris', weight: 0 },
    { role: 'user', content: 'Can you be more sarcastic?' },
    { role: 'assistant', content: "Paris, as if everyone doesn't know that already.", weight: 1 },
  ],
}
const DATASET = Buffer.from(`${JSON.stringify(conversation)}\n${JSON.stringify(conversation)}\n`)

t.test('fine-tuning.mdx: upload, list, create a job, list jobs, events, cancel, delete', async (t) => {
  let fileId = ''
  await t.test('Upload Training Data: files.create with purpose fine-tune', async (t) => {
    const uploaded = await client.files.create({
      file: await toFile(DATASET, 'your_dataset.jsonl'),
      purpose: 'fine-tune',
    })
    t.match(uploaded.id, /^file-/, 'print(uploaded.id)  # e.g. "file-abc123"')
    t.equal(uploaded.purpose, 'fine-tune')
    t.equal(uploaded.bytes, DATASET.length)
    fileId = uploaded.id
  })

  await t.test('List Uploaded Files: files.list(purpose="fine-tune")', async (t) => {
    const files = await client.files.list({ purpose: 'fine-tune' })
    const mine = files.data.find((f) => f.id === fileId)
    t.equal(mine?.filename, 'your_dataset.jsonl')
    t.type(mine?.created_at, 'number')
    t.ok(
      files.data.every((f) => f.purpose === 'fine-tune'),
      'only fine-tune files',
    )
  })

  let jobId = ''
  await t.test('Create a Fine-Tuning Job: Llama-3.3-70B-Instruct, n_epochs 2', async (t) => {
    const job = await client.fineTuning.jobs.create({
      training_file: fileId,
      model: 'Llama-3.3-70B-Instruct',
      hyperparameters: { n_epochs: 2 },
    })
    t.match(job.id, /^ftjob-/)
    t.ok(['validating_files', 'queued', 'running'].includes(job.status), `Status: ${job.status}`)
    t.equal(job.hyperparameters.n_epochs, 2)
    t.equal(job.training_file, fileId)
    jobId = job.id
  })

  await t.test('List Fine-Tuning Jobs: jobs.list(limit=10)', async (t) => {
    const jobs = await client.fineTuning.jobs.list({ limit: 10 })
    t.ok(jobs.data.length <= 10)
    const job = jobs.data.find((j) => j.id === jobId)
    t.equal(job?.model, 'Llama-3.3-70B-Instruct')
    t.type(job?.status, 'string')
  })

  await t.test('Monitor Job Events: list_events(limit=10)', async (t) => {
    const events = await client.fineTuning.jobs.listEvents(jobId, { limit: 10 })
    t.ok(events.data.length > 0 && events.data.length <= 10)
    for (const event of events.data) {
      t.ok(
        typeof event.created_at === 'number' &&
          ['info', 'warn', 'error'].includes(event.level) &&
          event.message.length > 0,
        `[${event.created_at}] ${event.level}: ${event.message}`,
      )
    }
  })

  await t.test('Cancel a Job', async (t) => {
    const cancelled = await client.fineTuning.jobs.cancel(jobId)
    t.equal(cancelled.id, jobId)
    // The mock's job may have run to the end already (fineTuneStepMs is short in tests): then it stays succeeded.
    t.ok(['cancelled', 'succeeded'].includes(cancelled.status), cancelled.status)
  })

  await t.test('Delete a File', async (t) => {
    const deleted = await client.files.delete(fileId)
    t.same({ id: deleted.id, deleted: deleted.deleted }, { id: fileId, deleted: true })
    t.notOk(
      (await client.files.list({ purpose: 'fine-tune' })).data.some((f) => f.id === fileId),
      'gone from the list',
    )
  })
})

t.test(
  'fine-tuning.mdx, Overview: the supported file formats upload (PDF, TXT, DOCX, CSV, JSON, JSONL, ZIP)',
  async (t) => {
    const samples: Record<string, string> = {
      'a.pdf': '%PDF-1.4\n%%EOF\n',
      'a.txt': 'plain text',
      'a.docx': 'PK\u0003\u0004docx',
      'a.csv': 'q,a\n1,2\n',
      'a.json': JSON.stringify([conversation]),
      'a.jsonl': JSON.stringify(conversation),
      'a.zip': 'PK\u0003\u0004zip',
    }
    for (const [name, text] of Object.entries(samples)) {
      const uploaded = await client.files.create({ file: await toFile(Buffer.from(text), name), purpose: 'fine-tune' })
      t.equal(uploaded.filename, name, `${name} uploaded`)
    }
  },
)

// Overview: "Supported models: Mistral-Nemo-Instruct-2407, Llama-3.1-70B-Instruct". Base
// models for training (fineTuning.baseModels), not served for inference.
t.test(
  'fine-tuning.mdx, Overview: the supported base models take a job, and are not served for inference',
  async (t) => {
    const file = await client.files.create({ file: await toFile(DATASET, 'base.jsonl'), purpose: 'fine-tune' })
    for (const model of ['Mistral-Nemo-Instruct-2407', 'Llama-3.1-70B-Instruct']) {
      const job = await client.fineTuning.jobs.create({ training_file: file.id, model })
      t.match(job.id, /^ftjob-/, `a job on ${model}`)
      t.equal(job.model, model)
      const listed = (await client.models.list()).data.map((m) => m.id)
      t.notOk(listed.includes(model), `${model} is not in /v2/models`)
      await t.rejects(
        client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] }),
        { status: 404 } as unknown as Error,
        `${model} is not served for chat`,
      )
    }
    await t.rejects(
      client.fineTuning.jobs.create({ training_file: file.id, model: 'Not-A-Base-Model' }),
      { status: 404 } as unknown as Error,
      'any other name is still unknown',
    )
  },
)
