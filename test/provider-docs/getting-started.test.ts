// The provider's front page and "Getting Started" pages (telekom/aifoundation-docs,
// src/content/docs/v1/): index.mdx ("Try It Now"), getting-started/quickstart.mdx, authentication.mdx and the parts of models.mdx that
// models.test.ts does not run (the curl and Python tabs of "List Models via API", the
// "Model Categories" table, "Hosting & Compliance"). Each example is a call written here
// after the page and heading named beside it; Python is carried over to the JS SDK call
// for call, and `client = OpenAI()` is `new OpenAI()`, reading the two variables the pages
// export (docs-gateway.ts). Not run (see INDEX.md): the Windows PowerShell and CMD tabs
// (OS-specific shell setup), the `pip`/`npm install` lines (no API call), the portal and
// marketplace steps (purchases; the admin API stands in for the portal).
import OpenAI from 'openai'
import t from 'tap'
import { curlGet, curlJson, startDocsGateway } from './docs-gateway.ts'

const { gw, key, base } = await startDocsGateway()

interface ChatReply {
  object: string
  model: string
  choices: Array<{ message: { role: string; content: string } }>
  usage: { total_tokens: number }
}
type WithMeta = OpenAI.Models.Model & {
  meta_data: {
    model_type: string
    source_type: string
    deployment_region: string
    is_externally_hosted: boolean
    input_modalities: string[]
  }
}

t.test('index.mdx, Try It Now (curl)', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Hello from AIFS' }],
  })
  t.equal(res.status, 200)
  t.ok(((await res.json()) as ChatReply).choices[0]?.message.content.length)
})

t.test('index.mdx, Try It Now (Python and Node.js): the base URL given, the key from the environment', async (t) => {
  const client = new OpenAI({ baseURL: base })
  const response = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Hello from AIFS' }],
  })
  t.ok(response.choices[0]?.message.content?.length, 'print(response.choices[0].message.content)')
})

t.test('quickstart.mdx, Step 3 (macOS / Linux): the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL', async (t) => {
  // `export OPENAI_API_KEY=...; export OPENAI_BASE_URL=.../v2` (docs-gateway.ts), then OpenAI().
  const client = new OpenAI()
  t.equal(client.baseURL, base)
  t.equal(client.apiKey, key)
})

t.test('quickstart.mdx, Step 4: Make Your First API Call (curl)', async (t) => {
  const res = await curlJson(`${process.env.OPENAI_BASE_URL}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is quantum computing in simple terms?' },
    ],
    temperature: 0.5,
    max_tokens: 150,
  })
  t.equal(res.status, 200)
  const body = (await res.json()) as ChatReply
  t.equal(body.object, 'chat.completion')
  t.ok(body.choices[0]?.message.content.length, 'an answer')
})

t.test('quickstart.mdx, Step 4: Make Your First API Call (Python and Node.js tabs: the same SDK call)', async (t) => {
  const client = new OpenAI() // reads OPENAI_API_KEY and OPENAI_BASE_URL from env
  const response = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is quantum computing in simple terms?' },
    ],
    temperature: 0.5,
    max_tokens: 150,
  })
  // print(response.choices[0].message.content)
  t.type(response.choices[0]?.message.content, 'string')
  t.ok((response.usage?.completion_tokens ?? 0) <= 150, 'max_tokens honoured')
})

t.test('quickstart.mdx, More Examples: Create Embeddings', async (t) => {
  const client = new OpenAI()
  const texts = ['The quick brown fox jumps over the lazy dog', 'Data science is fun!']
  const result = await client.embeddings.create({ input: texts, model: 'jina-embeddings-v2-base-de' })
  // print(f"Embedding dimension: {len(result.data[0].embedding)}"), then result.usage
  t.equal(result.data[0]?.embedding.length, 768)
  t.ok(result.usage.prompt_tokens > 0 && result.usage.total_tokens === result.usage.prompt_tokens, 'usage counted')
})

t.test('quickstart.mdx, More Examples: Vision / Multimodal (an image by URL)', async (t) => {
  const client = new OpenAI()
  const response = await client.chat.completions.create({
    model: 'Qwen3-VL-30B-A3B-Instruct-FP8',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: "What's in this image?" },
          { type: 'image_url', image_url: { url: 'https://images.unsplash.com/photo-1546069901-ba9599a7e63c?w=400' } },
        ],
      },
    ],
    max_tokens: 300,
  })
  t.type(response.choices[0]?.message.content, 'string')
})

t.test('authentication.mdx, Using the API Key: With OpenAI SDKs (from the environment, and explicit)', async (t) => {
  // client = OpenAI()  # No need to pass api_key or base_url
  const fromEnv = new OpenAI()
  // client = OpenAI(api_key="...", base_url=".../v2")
  const explicit = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2` })
  for (const client of [fromEnv, explicit]) {
    const reply = await client.chat.completions.create({
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'Hello' }],
    })
    t.equal(reply.object, 'chat.completion')
  }
})

t.test('authentication.mdx, With HTTP Requests: the key in the Authorization header', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Hello' }],
  })
  t.equal(res.status, 200)
  t.equal(((await res.json()) as ChatReply).model, 'Llama-3.3-70B-Instruct')
  // "All requests must include your API key in the Authorization header."
  const bare = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'Llama-3.3-70B-Instruct', messages: [{ role: 'user', content: 'Hello' }] }),
  })
  t.equal(bare.status, 401)
  t.equal(((await bare.json()) as { error: { code: string } }).error.code, 'invalid_api_key')
})

t.test(
  'authentication.mdx, Base URL: /v2 is the OpenAI-compatible endpoint, its specification at /redoc',
  async (t) => {
    t.equal((await curlGet(`${base}/models`, key)).status, 200)
    const redoc = await fetch(`${gw.url}/redoc`)
    t.equal(redoc.status, 200)
    t.match(redoc.headers.get('content-type'), /text\/html/)
  },
)

t.test('authentication.mdx, Free Trial Key: "gives you access to all available models"', async (t) => {
  // A key made with no tier and no model scope (the trial key of the page) lists them all.
  const { key: trial } = await gw.createKey({ name: 'trial' })
  const client = new OpenAI({ apiKey: trial, baseURL: base })
  const models = await client.models.list()
  t.equal(models.data.length, 40, "the catalogue's 40 models")
})

t.test('models.mdx, List Models via API (curl)', async (t) => {
  const res = await curlGet(`${process.env.OPENAI_BASE_URL}/models`, key)
  t.equal(res.status, 200)
  const body = (await res.json()) as { object: string; data: Array<{ id: string; object: string }> }
  t.equal(body.object, 'list')
  t.ok(body.data.length > 0 && body.data.every((m) => m.object === 'model' && typeof m.id === 'string'))
})

t.test('models.mdx, List Models via API (Python and Node.js: models.data of one list call)', async (t) => {
  const client = new OpenAI()
  const models = await client.models.list()
  const ids = models.data.map((model) => model.id) // for model in models.data: print(model.id)
  t.ok(ids.includes('Llama-3.3-70B-Instruct'))
  t.equal(new Set(ids).size, ids.length, 'each once')
})

t.test('models.mdx, Model Categories: each example model is served, of its category', async (t) => {
  const byId = new Map((await new OpenAI().models.list()).data.map((m) => [m.id, (m as WithMeta).meta_data]))
  const categories: Record<string, { type: string; models: string[]; modality?: string }> = {
    LLM: { type: 'LLM', models: ['Llama-3.3-70B-Instruct', 'gpt-4.1', 'claude-sonnet-4', 'Qwen3-30B-A3B-FP8'] },
    Embedding: { type: 'EMBEDDING', models: ['jina-embeddings-v2-base-de', 'text-embedding-bge-m3'] },
    Vision: { type: 'LLM', models: ['Qwen3-VL-30B-A3B-Instruct-FP8', 'gemini-2.5-flash'], modality: 'image' },
    'Audio/STT': { type: 'STT', models: ['whisper-large-v3', 'whisper-large-v3-turbo'] },
    'Image Generation': { type: 'IMAGE_GENERATION', models: ['gpt-image-1'] },
  }
  for (const [category, { type, models, modality }] of Object.entries(categories)) {
    for (const id of models) {
      const meta = byId.get(id)
      t.equal(meta?.model_type, type, `${category}: ${id}`)
      if (modality !== undefined) t.ok(meta?.input_modalities.includes(modality), `${id} takes ${modality}`)
    }
  }
})

t.test(
  'models.mdx, Hosting & Compliance: open source on T-Cloud Germany, proprietary on Azure, AWS or GCP, all in the EU',
  async (t) => {
    const models = (await new OpenAI().models.list()).data.map((m) => m as WithMeta)
    for (const { id, meta_data: meta } of models) {
      if (meta.source_type === 'OPEN SOURCE') {
        t.ok(
          meta.deployment_region.startsWith('otc-') && !meta.is_externally_hosted,
          `${id}: T-Cloud (${meta.deployment_region})`,
        )
      } else {
        t.equal(meta.source_type, 'PROPRIETARY')
        t.ok(
          /^(azure|gcp|aws)-/i.test(meta.deployment_region) && meta.is_externally_hosted,
          `${id}: external (${meta.deployment_region})`,
        )
        t.notMatch(meta.deployment_region, /-us\b|-east-us|-west-us/i, `${id}: in the EU`)
      }
    }
    for (const id of ['gpt-4.1', 'claude-sonnet-4', 'gemini-2.5-flash']) {
      t.equal(models.find((m) => m.id === id)?.meta_data.source_type, 'PROPRIETARY', `${id} is proprietary`)
    }
  },
)
