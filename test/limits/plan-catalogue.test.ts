// The provider's three plan catalogue exports (config/catalogue/) convert into valid plans:
// the legacy one, the current one (2026-01-19: stray whitespace in a name) and the next one
// (2026-04-24: other tiers, limits given as words where the provider sets them dynamically).
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { plansSchema } from '../../src/config/schema.ts'
import { contextTokens, importPlanCatalogue, tierName } from '../../src/limits/plan-catalogue.ts'

const read = (name: string): unknown =>
  JSON.parse(readFileSync(join(import.meta.dirname, '../../config/catalogue', name), 'utf8'))

t.test('legacy export: the five Tarif tiers, Basic by default, regions kept', async (t) => {
  const { plans, notes } = importPlanCatalogue(read('plans-legacy.json'), { source: 'plans-legacy.json' })
  t.same(plansSchema.parse(plans), plans, 'valid as the gateway validates plans')
  t.same(Object.keys(plans.tiers), ['Basic', 'Standard1000', 'Standard2000', 'Standard3000', 'Standard4000'])
  t.equal(plans.defaultTier, 'Basic')
  t.same(notes, [])
  t.same(plans.tiers.Basic?.models['gpt-oss-120b'], {
    rpm: 20,
    input_tpm: 43750,
    output_tpm: 28750,
    input_price: 3.53,
    output_price: 3.53,
  })
  t.ok(plans.tiers.Basic?.models['Qwen2.5-VL-72B-Instruct'], 'the legacy catalogue still had Qwen2.5-VL')
  t.same(
    plans.catalogue?.models['gpt-oss-120b'],
    { deployment_region: 'otc-germany' },
    'no display names in the legacy export',
  )
  t.match(plans.tiers.Standard1000?.description, /plans-legacy\.json/)
})

t.test('2026-01-19 export: 40 models, names trimmed, display names, STT entries out of the tier default', async (t) => {
  const { plans } = importPlanCatalogue(read('plans-2026-01-19.json'))
  t.same(plansSchema.parse(plans), plans)
  const names = new Set(Object.values(plans.tiers).flatMap((tier) => Object.keys(tier.models)))
  t.equal(names.size, 40)
  for (const name of names) t.equal(name, name.trim(), `"${name}" has no stray whitespace`)
  t.ok(plans.tiers.Standard1000?.models['gemini-3-pro'], '" gemini-3-pro" is gemini-3-pro')
  t.notOk(plans.tiers.Standard1000?.models[' gemini-3-pro'])
  for (const name of [
    'whisper-large-v3',
    'whisper-large-v3-turbo',
    'Qwen3-VL-30B-A3B-Instruct-FP8',
    'Mistral-Medium-3',
    'claude-sonnet-4.5',
    'GPT-5-Codex',
    'gemini-3-pro',
  ]) {
    t.ok(names.has(name), `${name} is in the catalogue`)
  }
  t.notOk(names.has('Qwen2.5-VL-72B-Instruct'))
  t.same(plans.catalogue?.models['gemini-3-pro'], { display_name: 'Gemini 3 Pro', deployment_region: 'GCP-Europe' })
  t.same(plans.catalogue?.models['Llama-3.3-70B-Instruct'], {
    display_name: 'Meta LLama 3.3 70B',
    deployment_region: 'otc-germany',
  })
  // whisper-large-v3 has 109 tokens a minute on Basic (audio); a chat model the tier does not
  // list must not get that: the default is the tightest of the text models' limits.
  t.equal(plans.tiers.Basic?.models['whisper-large-v3']?.input_tpm, 109)
  t.same(plans.tiers.Basic?.default, { rpm: 20, input_tpm: 13800, output_tpm: 5000 })
})

t.test(
  '2026-04-24 (next) export: Essential, Professional, Agentic, Test; dynamic quotas are no limit, and said',
  async (t) => {
    const { plans, notes } = importPlanCatalogue(read('plans-2026-04-24-next.json'), { source: 'next.json' })
    t.same(plansSchema.parse(plans), plans)
    t.same(Object.keys(plans.tiers), ['Essential', 'Professional', 'Agentic', 'Test'])
    t.equal(plans.defaultTier, 'Essential', 'no Basic: the first tier of the export is the default')
    t.same(plans.tiers.Essential?.models['jina-embeddings-v2-base-de'], {
      rpm: 300,
      input_tpm: 300000,
      output_tpm: 150000,
      input_price: 0.05,
      output_price: 0.05,
    })
    t.same(
      plans.tiers.Essential?.models['gemini-2.5-pro'],
      {
        input_price: plans.tiers.Essential?.models['gemini-2.5-pro']?.input_price,
        output_price: plans.tiers.Essential?.models['gemini-2.5-pro']?.output_price,
      },
      '"Dynamic Shared Quota": prices only',
    )
    t.same(plans.tiers.Test?.models['gemma-4-31B'], { input_price: 0, output_price: 0 }, '"dynamic": no limit')
    t.ok(
      notes.some((n) => n.startsWith('Essential / gemini-2.5-pro:') && n.includes('Dynamic Shared Quota')),
      'the operator is told',
    )
    t.ok(notes.some((n) => n.startsWith('Test / gemma-4-31B:')))
    t.equal(notes.length, 3 * 7 + 1, 'seven DSQ models in each of three tiers, and the test model')
    t.same(plans.catalogue?.models['Qwen3-VL-30B-A3B-Instruct-FP8'], {
      display_name: 'Qwen3-VL 30B',
      deployment_region: 'otc-germany',
      max_sequence_length: 128000,
      license: 'https://www.apache.org/licenses/LICENSE-2.0.html',
    })
    t.equal(plans.catalogue?.source, 'next.json')
    // The tier default leaves the STT entries (labelled "OpenAI STT") out.
    const whisper = plans.tiers.Essential?.models['whisper-large-v3']?.input_tpm ?? 0
    t.ok((plans.tiers.Essential?.default.input_tpm ?? 0) > whisper)
    t.same(
      importPlanCatalogue(read('plans-2026-04-24-next.json'), { defaultTier: 'Agentic' }).plans.defaultTier,
      'Agentic',
    )
  },
)

t.test('refusals: not an export, an unknown default tier, a model listed twice', async (t) => {
  t.throws(() => importPlanCatalogue({ packages: [] }), /not a plan catalogue export/)
  t.throws(
    () => importPlanCatalogue([{ packageName: 'X', isActive: true, modelQuotaConfigs: [{ exactModelName: 'm' }] }]),
    /not a plan catalogue export: 0\.modelQuotaConfigs\.0\./,
  )
  t.throws(
    () => importPlanCatalogue(read('plans-legacy.json'), { defaultTier: 'Gold' }),
    /default tier "Gold" is not in the catalogue \(tiers: Basic, Standard1000/,
  )
  const entry = {
    inputTokenPerMinuteLimit: 1,
    outputTokenPerMinuteLimit: 1,
    lifetimeTokenLimit: 0,
    requestPerMinuteLimit: 1,
    inputPricePerMillionTokens: 1,
    outputPricePerMillionTokens: 1,
  }
  t.throws(
    () =>
      importPlanCatalogue([
        {
          packageName: 'Tarif Basic Template',
          isActive: true,
          modelQuotaConfigs: [
            { ...entry, exactModelName: 'a' },
            { ...entry, exactModelName: ' a' },
          ],
        },
      ]),
    /model "a" is listed twice/,
  )
  t.throws(
    () => importPlanCatalogue([{ packageName: 'Old', isActive: false, modelQuotaConfigs: [] }]),
    /no active package/,
  )
})

t.test('tier and context window names', async (t) => {
  t.equal(tierName('Tarif Standard1000 Template'), 'Standard1000')
  t.equal(tierName(' Tarif Basic Template'), 'Basic')
  t.equal(tierName('Professional'), 'Professional')
  t.equal(contextTokens('128K'), 128000)
  t.equal(contextTokens('1M'), 1000000)
  t.equal(contextTokens('448'), 448)
  t.equal(contextTokens('lots'), undefined)
  t.equal(contextTokens(null), undefined)
})
