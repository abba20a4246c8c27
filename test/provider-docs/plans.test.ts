// The provider's plan pages (telekom/aifoundation-docs, src/content/docs/v1/plans/index.mdx,
// basic.mdx, standard-1000.mdx … standard-4000.mdx) and the model claims of its FAQ (faq.mdx),
// against the gateway `npm start` runs. The v1 plan pages render the provider's export of
// 2026-01-19 (components/PlansPage.astro with `legacy`), which the repository ships as
// config/catalogue/plans-2026-01-19.json; for each plan the page lists, per model, the RPM
// limit, the input and output token limits per minute and the prices per million tokens,
// and in its overview a representative T-Cloud model's RPM and price. Here a key of each
// tier calls each model its page lists, and the limits it sees in the x-ratelimit-limit-*
// headers are the page's; the prices are GET /admin/tiers's.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { AUDIO, curlForm, curlJson, startDocsGateway } from './docs-gateway.ts'

interface QuotaConfig {
  exactModelName: string
  requestPerMinuteLimit: number
  inputTokenPerMinuteLimit: number
  outputTokenPerMinuteLimit: number
  inputPricePerMillionTokens: number
  outputPricePerMillionTokens: number
  deploymentRegion: string
}
interface Package {
  packageName: string
  modelQuotaConfigs: QuotaConfig[]
}
interface Tier {
  name: string
  models: Record<
    string,
    { rpm?: number; input_tpm?: number; output_tpm?: number; input_price?: number; output_price?: number }
  >
}
interface Listed {
  id: string
  meta_data: { model_type: string; deployment_region: string; input_modalities: string[] }
}

const EXPORT = JSON.parse(
  readFileSync(join(import.meta.dirname, '../../config/catalogue/plans-2026-01-19.json'), 'utf8'),
) as Package[]
/** The pages: plans/basic.mdx shows "Tarif Basic Template", and so on. */
const PAGES: Record<string, string> = {
  'basic.mdx': 'Tarif Basic Template',
  'standard-1000.mdx': 'Tarif Standard1000 Template',
  'standard-2000.mdx': 'Tarif Standard2000 Template',
  'standard-3000.mdx': 'Tarif Standard3000 Template',
  'standard-4000.mdx': 'Tarif Standard4000 Template',
}
const tierOf = (packageName: string): string => packageName.replace(/^Tarif /, '').replace(/ Template$/, '')

const { gw, base } = await startDocsGateway('Basic')
const tiers = (
  (await (await fetch(`${gw.url}/admin/tiers`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).json()) as {
    data: Tier[]
  }
).data

/** One call of the model's kind, the cheapest there is; its response's headers. */
async function callOnce(apiKey: string, model: Listed): Promise<Response> {
  const type = model.meta_data.model_type
  const res =
    type === 'EMBEDDING'
      ? await curlJson(`${base}/embeddings`, apiKey, { model: model.id, input: 'Hi' })
      : type === 'STT'
        ? await curlForm(`${base}/audio/transcriptions`, apiKey, { model: model.id }, { name: 'a.mp3', data: AUDIO })
        : type === 'IMAGE_GENERATION'
          ? await curlJson(`${base}/images/generations`, apiKey, { model: model.id, prompt: 'A dot' })
          : await curlJson(`${base}/chat/completions`, apiKey, {
              model: model.id,
              messages: [{ role: 'user', content: 'Hi' }],
              max_tokens: 1,
            })
  await res.arrayBuffer()
  return res
}

t.test("plans/index.mdx: the five plans are the gateway's tiers, Basic the default", async (t) => {
  t.same(tiers.map((tier) => tier.name).sort(), Object.values(PAGES).map(tierOf).sort())
  const res = await fetch(`${gw.url}/admin/tiers`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  t.equal(((await res.json()) as { default_tier: string }).default_tier, 'Basic')
})

for (const [page, packageName] of Object.entries(PAGES)) {
  t.test(
    `plans/${page}: a ${tierOf(packageName)} key is served every model the page lists, at the page's limits and prices`,
    async (t) => {
      const tier = tierOf(packageName)
      const quotas = EXPORT.find((p) => p.packageName === packageName)?.modelQuotaConfigs ?? []
      t.ok(quotas.length > 0, `${quotas.length} models`)
      const { key } = await gw.createKey({ name: `plans ${tier}`, tier })
      const listed = (
        (await (await fetch(`${base}/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
          data: Listed[]
        }
      ).data
      const byId = new Map(listed.map((m) => [m.id, m]))
      const prices = tiers.find((x) => x.name === tier)?.models ?? {}
      const seen = await Promise.all(
        quotas.map(async (quota) => {
          const id = quota.exactModelName.trim() // the export has " gemini-3-pro"
          const model = byId.get(id)
          return { quota, id, model, res: model === undefined ? undefined : await callOnce(key, model) }
        }),
      )
      for (const { quota, id, model, res } of seen) {
        t.ok(model !== undefined, `${id} is in GET /v2/models`)
        t.equal(
          model?.meta_data.deployment_region,
          quota.deploymentRegion,
          `${id}: server location ${quota.deploymentRegion}`,
        )
        t.equal(res?.status, 200, `${id}: served`)
        t.same(
          {
            rpm: res?.headers.get('x-ratelimit-limit-requests'),
            input: res?.headers.get('x-ratelimit-limit-input-tokens'),
            output: res?.headers.get('x-ratelimit-limit-output-tokens'),
          },
          {
            rpm: String(quota.requestPerMinuteLimit),
            input: String(quota.inputTokenPerMinuteLimit),
            output: String(quota.outputTokenPerMinuteLimit),
          },
          `${id}: RPM ${quota.requestPerMinuteLimit}, TPM ${quota.inputTokenPerMinuteLimit} in / ${quota.outputTokenPerMinuteLimit} out`,
        )
        t.same(
          [prices[id]?.input_price, prices[id]?.output_price],
          [quota.inputPricePerMillionTokens, quota.outputPricePerMillionTokens],
          `${id}: € per million tokens`,
        )
      }
    },
  )
}

t.test('plans/index.mdx, Our Rate Plans: the RPM and token price of the representative T-Cloud model', async (t) => {
  // PlansPage.astro's legacy overview: RPM 20, 150, 300, 450, 600; €3.53, 3.53, 2.89, 2.23, 1.75 per million.
  const overview: Record<string, [number, number]> = {
    Basic: [20, 3.53],
    Standard1000: [150, 3.53],
    Standard2000: [300, 2.89],
    Standard3000: [450, 2.23],
    Standard4000: [600, 1.75],
  }
  for (const [tier, [rpm, price]] of Object.entries(overview)) {
    const { key } = await gw.createKey({ tier })
    const res = await curlJson(`${base}/chat/completions`, key, {
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
    })
    await res.arrayBuffer()
    t.equal(res.headers.get('x-ratelimit-limit-requests'), String(rpm), `${tier}: ${rpm} RPM`)
    t.equal(
      tiers.find((x) => x.name === tier)?.models['Llama-3.3-70B-Instruct']?.input_price,
      price,
      `${tier}: €${price}`,
    )
  }
})

t.test(
  'faq.mdx, Which LLMs are available: over 15 language models, open and closed, text, image and audio',
  async (t) => {
    const { key } = await gw.createKey({})
    const models = (
      (await (await fetch(`${base}/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        data: Listed[]
      }
    ).data
    const llms = models.filter((m) => m.meta_data.model_type === 'LLM').map((m) => m.id)
    t.ok(llms.length > 15, `${llms.length} language models`)
    // The families the answer names; DeepSeek is not in the 2026-01-19 catalogue (see INDEX.md).
    for (const family of [/^Llama/, /^Mistral/, /^Qwen/, /^gpt-/, /^claude-sonnet/])
      t.ok(
        llms.some((id) => family.test(id)),
        `a ${family.source} model`,
      )
    const modalities = new Set(models.flatMap((m) => m.meta_data.input_modalities))
    for (const modality of ['text', 'image', 'audio']) t.ok(modalities.has(modality), `models that take ${modality}`)
  },
)
