// Issue 27, items 1, 2 and 6: the provider's model-listing and filtering examples run against
// Tollgate as `npm start` starts it. Pages (telekom/aifoundation-docs, src/content/docs/):
// getting-started/models.mdx ("List Models via API", "Model Metadata", "Model Categories"),
// guides/audio.mdx ("List Audio Models", "Audio Transcription"), guides/embeddings.mdx
// (the embeddings call and "Available Embedding Models"), guides/multimodal.mdx and
// getting-started/quickstart.mdx (the vision model). Python is carried over to the JS SDK:
// `model.meta_data.get("model_type")` is a read of the extra field the SDK keeps.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { parse } from 'yaml'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { rejectsWith } from '../helpers/assert.ts'
import { startTollgate } from '../helpers/gateway.ts'

const ROOT = join(import.meta.dirname, '../..')
const gw = await startTollgate()
t.teardown(() => gw.stop())
const { key } = await gw.createKey()
const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })

interface MetaData {
  model_type: string
  source_type: string | null
  max_sequence_length: number
  hidden_size: number
  max_output_length: number
  deployment_region: string | null
  location: string | null
  license: string | null
  display_name: string
  deployment_country: string | null
  input_modalities: string[]
  output_modalities: string[]
  model_lifecycle_stage: string
  is_externally_hosted: boolean
}
/** The SDK's Model plus the provider's extra field. */
type ProviderModel = OpenAI.Models.Model & { meta_data: MetaData }

const META_FIELDS = [
  'model_type',
  'source_type',
  'max_sequence_length',
  'hidden_size',
  'max_output_length',
  'deployment_region',
  'location',
  'license',
  'display_name',
  'deployment_country',
  'input_modalities',
  'output_modalities',
  'model_lifecycle_stage',
  'is_externally_hosted',
]

async function listModels(): Promise<ProviderModel[]> {
  const models: ProviderModel[] = []
  // models.mdx, "List Models via API" (Node.js tab): for ... of models.data.
  for await (const model of client.models.list()) models.push(model as ProviderModel)
  return models
}

const catalogue = (): string[] => {
  const exported = JSON.parse(readFileSync(join(ROOT, 'config/catalogue/plans-2026-01-19.json'), 'utf8')) as Array<{
    modelQuotaConfigs: Array<{ exactModelName: string }>
  }>
  return [...new Set(exported.flatMap((p) => p.modelQuotaConfigs.map((q) => q.exactModelName.trim())))].sort()
}

t.test(
  "models.mdx: the list is the catalogue's 40 models, each with meta_data (every field, right types)",
  async (t) => {
    const models = await listModels()
    t.same(
      models.map((m) => m.id).sort(),
      catalogue(),
      'the models of config/catalogue/plans-2026-01-19.json, names trimmed',
    )
    t.equal(models.length, 40)
    for (const model of models) {
      t.same(Object.keys(model.meta_data).sort(), [...META_FIELDS].sort(), `${model.id}: every field`)
      t.ok(
        ['LLM', 'EMBEDDING', 'STT', 'IMAGE_GENERATION'].includes(model.meta_data.model_type),
        `${model.id}: model_type`,
      )
      t.ok(
        Number.isInteger(model.meta_data.max_sequence_length) && Number.isInteger(model.meta_data.hidden_size),
        `${model.id}: numbers`,
      )
      t.ok(
        model.meta_data.display_name.length > 0 && model.meta_data.deployment_region !== null,
        `${model.id}: from the catalogue`,
      )
      t.ok(
        model.meta_data.input_modalities.length > 0 && model.meta_data.output_modalities.length > 0,
        `${model.id}: modalities`,
      )
      t.equal(typeof model.meta_data.is_externally_hosted, 'boolean')
    }
    // models.mdx, "Model Metadata": print(models.data[0].meta_data), shown for Llama 3.3.
    const llama = models.find((m) => m.id === 'Llama-3.3-70B-Instruct')
    t.match(llama?.meta_data, {
      model_type: 'LLM',
      source_type: 'OPEN SOURCE',
      hidden_size: 0,
      deployment_region: 'otc-germany',
      location: 'otc-germany',
      display_name: 'Meta LLama 3.3 70B',
      deployment_country: 'Germany, EU',
      input_modalities: ['text'],
      output_modalities: ['text'],
      model_lifecycle_stage: 'Stable',
      is_externally_hosted: false,
    })
    t.ok((llama?.meta_data.max_sequence_length ?? 0) >= 128000)
    // The catalogue's display names and regions, the configuration's hosting facts.
    const byId = new Map(models.map((m) => [m.id, m.meta_data]))
    t.match(byId.get('gemini-3-pro'), {
      display_name: 'Gemini 3 Pro',
      deployment_region: 'GCP-Europe',
      is_externally_hosted: true,
      source_type: 'PROPRIETARY',
    })
    t.match(byId.get('claude-sonnet-4.5'), { display_name: 'Claude 4.5 Sonnet', is_externally_hosted: true })
    t.match(byId.get('GPT-5-Codex'), { model_type: 'LLM', is_externally_hosted: true })
    t.match(byId.get('gpt-image-1'), { model_type: 'IMAGE_GENERATION', output_modalities: ['image'] })
  },
)

t.test("GET /models/{id} carries the same meta_data (the SDK's retrieve)", async (t) => {
  const models = await listModels()
  for (const id of [
    'whisper-large-v3',
    'Qwen3-VL-30B-A3B-Instruct-FP8',
    'jina-embeddings-v2-base-de',
    'Mistral-Medium-3',
  ]) {
    const one = (await client.models.retrieve(id)) as ProviderModel
    t.same(one.meta_data, models.find((m) => m.id === id)?.meta_data, id)
  }
})

t.test(
  'audio.mdx: the models filtered on model_type STT are the audio models, and /audio/models lists the same',
  async (t) => {
    // audio.mdx, "List Audio Models" (Python tab): if model.meta_data.get("model_type") == "STT".
    const stt = (await listModels()).filter((m) => m.meta_data.model_type === 'STT').map((m) => m.id)
    t.same(stt.sort(), ['whisper-large-v3', 'whisper-large-v3-turbo'])
    // audio.mdx, the curl tab: GET $OPENAI_BASE_URL/audio/models.
    const res = await fetch(`${gw.url}/v2/audio/models`, { headers: { authorization: `Bearer ${key}` } })
    t.equal(res.status, 200)
    const listed = (await res.json()) as { data: ProviderModel[] }
    t.same(listed.data.map((m) => m.id).sort(), stt)
    t.ok(listed.data.every((m) => m.meta_data.model_type === 'STT' && m.meta_data.input_modalities.includes('audio')))
    // audio.mdx, "Audio Transcription": the model the page names is served.
    const transcription = await client.audio.transcriptions.create({
      model: 'whisper-large-v3',
      file: await toFile(Buffer.alloc(16_000, 1), 'audio_file.mp3'),
    })
    t.type(transcription.text, 'string')
  },
)

t.test("embeddings.mdx: the vectors have each model's dimension, as its meta_data.hidden_size says", async (t) => {
  const models = await listModels()
  const embedding = models.filter((m) => m.meta_data.model_type === 'EMBEDDING')
  t.same(embedding.map((m) => m.id).sort(), [
    'jina-embeddings-v2-base-code',
    'jina-embeddings-v2-base-de',
    'text-embedding-ada-002',
    'text-embedding-bge-m3',
    'tsi-embedding-colqwen2-2b-v1',
  ])
  // embeddings.mdx, "Available Embedding Models": 768 and 1024.
  const expected: Record<string, number> = {
    'jina-embeddings-v2-base-de': 768,
    'text-embedding-bge-m3': 1024,
    'text-embedding-ada-002': 1536,
  }
  for (const model of embedding) {
    const dimension = model.meta_data.hidden_size
    if (expected[model.id] !== undefined) t.equal(dimension, expected[model.id], `${model.id}: hidden_size`)
    t.ok(dimension > 0, `${model.id} has a dimension`)
    // embeddings.mdx (Python tab): embeddings.create(input=texts, model=...), then len(data[0].embedding).
    const texts = ['Ich bin ein Berliner.', 'The quick brown fox.']
    const reply = await client.embeddings.create({ input: texts, model: model.id })
    t.equal(reply.data.length, texts.length)
    t.equal(reply.data[0]?.embedding.length, dimension, `${model.id}: ${dimension} dimensions`)
  }
  // `dimensions` still shortens, and cannot lengthen past the model's own.
  const short = await client.embeddings.create({ input: 'kurz', model: 'jina-embeddings-v2-base-de', dimensions: 64 })
  t.equal(short.data[0]?.embedding.length, 64)
  await rejectsWith(
    t,
    client.embeddings.create({ input: 'lang', model: 'jina-embeddings-v2-base-de', dimensions: 769 }),
    400,
    "not longer than the model's own",
  )
})

t.test(
  'models.mdx "Model Categories", multimodal.mdx, quickstart.mdx: the vision model reads images and answers',
  async (t) => {
    const byId = new Map((await listModels()).map((m) => [m.id, m.meta_data]))
    t.ok(byId.get('Qwen3-VL-30B-A3B-Instruct-FP8')?.input_modalities.includes('image'), 'Qwen3-VL takes images')
    t.ok(byId.get('gemini-2.5-flash')?.input_modalities.includes('image'), 'Gemini 2.5 Flash takes images')
    t.notOk(byId.get('Llama-3.3-70B-Instruct')?.input_modalities.includes('image'), 'Llama 3.3 does not')
    // multimodal.mdx: a chat call with a text part and an image_url part (a data URL here).
    const pixel =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
    const reply = await client.chat.completions.create({
      model: 'Qwen3-VL-30B-A3B-Instruct-FP8',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'What is in this image?' },
            { type: 'image_url', image_url: { url: pixel } },
          ],
        },
      ],
      max_tokens: 50,
    })
    t.type(reply.choices[0]?.message.content, 'string')
  },
)

t.test('/openapi.json documents meta_data on the Model object', async (t) => {
  const res = await fetch(`${gw.url}/openapi.json`)
  t.equal(res.status, 200)
  const text = await res.text()
  const doc = JSON.parse(text) as {
    components?: { schemas?: Record<string, { properties?: Record<string, { properties?: Record<string, unknown> }> }> }
  }
  const schemas = Object.values(doc.components?.schemas ?? {})
  const model = schemas.find((s) => s.properties?.meta_data !== undefined && s.properties.owned_by !== undefined)
  t.ok(model, 'a schema with owned_by and meta_data')
  const meta = JSON.stringify(model?.properties?.meta_data ?? {}) + text
  for (const field of META_FIELDS) t.ok(meta.includes(`"${field}"`), `documents ${field}`)
  t.ok(text.includes('STT'), 'says what model_type values are')
})

t.test("config/default.yaml lists exactly the catalogue's models, with their kind", async (t) => {
  const doc = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as {
    models: Array<{ name: string; kind: string }>
  }
  t.same(doc.models.map((m) => m.name).sort(), catalogue())
  const kinds = Object.fromEntries(doc.models.map((m) => [m.name, m.kind]))
  t.match(kinds, {
    'whisper-large-v3': 'audio',
    'whisper-large-v3-turbo': 'audio',
    'gpt-image-1': 'image',
    'text-embedding-bge-m3': 'embedding',
    'Qwen3-VL-30B-A3B-Instruct-FP8': 'chat',
  })
})
