// The provider's Image Generation and Multimodal (Vision) guides (telekom/aifoundation-docs,
// src/content/docs/v1/guides/image-generation.mdx and guides/multimodal.mdx), against the
// gateway `npm start` runs. models.test.ts runs a data-URL image on the vision model (the
// multimodal page's "Analyze a Local Image (Base64)"); here are the URL tabs and the
// tables. The image URL of the pages is passed as it is: the built-in mock does not fetch it.
import OpenAI from 'openai'
import t from 'tap'
import { curlJson, PIXEL_PNG, startDocsGateway } from './docs-gateway.ts'

const { key, base } = await startDocsGateway()
const client = new OpenAI()
const IMAGE_URL = 'https://images.unsplash.com/photo-1546069901-ba9599a7e63c?w=400'
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

type WithMeta = OpenAI.Models.Model & {
  meta_data: { model_type: string; deployment_region: string; input_modalities: string[]; output_modalities: string[] }
}

t.test('image-generation.mdx, Basic Usage (Python): b64_json decodes to a PNG', async (t) => {
  const prompt = `
A background with server racks and cables, with a futuristic city skyline
visible through a large window at sunrise. The room has blue and green LED
lights illuminating the equipment.
`
  const result = await client.images.generate({ model: 'gpt-image-1', prompt })
  const imageBytes = Buffer.from(result.data?.[0]?.b64_json ?? '', 'base64')
  t.same(imageBytes.subarray(0, 8), PNG_SIGNATURE, 'generated_image.png is a PNG')
})

t.test('image-generation.mdx, Basic Usage (curl)', async (t) => {
  const res = await curlJson(`${base}/images/generations`, key, {
    model: 'gpt-image-1',
    prompt: 'A futuristic data center at sunrise with blue LED lights',
  })
  t.equal(res.status, 200)
  const body = (await res.json()) as { created: number; data: Array<{ b64_json: string }> }
  t.type(body.created, 'number')
  t.same(Buffer.from(body.data[0]?.b64_json ?? '', 'base64').subarray(0, 8), PNG_SIGNATURE)
})

t.test('image-generation.mdx, Available Models: gpt-image-1, hosted on Azure', async (t) => {
  const model = (await client.models.retrieve('gpt-image-1')) as WithMeta
  t.equal(model.meta_data.model_type, 'IMAGE_GENERATION')
  t.match(model.meta_data.deployment_region, /^azure-/i)
  t.same(model.meta_data.output_modalities, ['image'])
})

const question = [
  { type: 'text' as const, text: "What's in this image?" },
  { type: 'image_url' as const, image_url: { url: IMAGE_URL } },
]

t.test('multimodal.mdx, Analyze an Image from URL (curl)', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'gemini-2.5-flash',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in this image?' },
          { type: 'image_url', image_url: { url: IMAGE_URL } },
        ],
      },
    ],
    max_tokens: 1024,
  })
  t.equal(res.status, 200)
  t.type(((await res.json()) as OpenAI.ChatCompletion).choices[0]?.message.content, 'string')
})

t.test('multimodal.mdx, Analyze an Image from URL (Python and Node.js)', async (t) => {
  const response = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: question }],
    max_tokens: 1024,
  })
  t.ok(response.choices[0]?.message.content?.length)
})

t.test('multimodal.mdx, Analyze a Local Image (Base64): a JPEG data URL on Qwen3-VL', async (t) => {
  // models.test.ts sends a PNG; the page says image/jpeg whatever the bytes: the label is taken as given.
  const base64Image = PIXEL_PNG.toString('base64')
  const response = await client.chat.completions.create({
    model: 'Qwen3-VL-30B-A3B-Instruct-FP8',
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: "What's in this image?" },
          { type: 'image_url', image_url: { url: `data:image/jpeg;base64,${base64Image}` } },
        ],
      },
    ],
    max_tokens: 1000,
  })
  t.type(response.choices[0]?.message.content, 'string')
})

t.test('multimodal.mdx, Available Vision Models: each takes images, on the provider named', async (t) => {
  const table: Record<string, RegExp> = {
    'Qwen3-VL-30B-A3B-Instruct-FP8': /^otc-germany$/, // T-Cloud (Germany)
    'gemini-2.5-flash': /^gcp-/i, // Google Cloud
    'gpt-4.1': /^azure-/i, // Azure
  }
  for (const [id, region] of Object.entries(table)) {
    const model = (await client.models.retrieve(id)) as WithMeta
    t.ok(model.meta_data.input_modalities.includes('image'), `${id} takes images`)
    t.match(model.meta_data.deployment_region, region, `${id} on ${model.meta_data.deployment_region}`)
    const reply = await client.chat.completions.create({
      model: id,
      messages: [{ role: 'user', content: question }],
      max_tokens: 16,
    })
    t.equal(reply.model, id)
  }
})
