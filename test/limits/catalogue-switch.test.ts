// A gateway switches plan catalogues the way an operator does it: `tollgate plans import`
// of the provider's export → plans YAML (and a models list with the same names) → start the
// gateway on it, keeping its data directory (and so its keys). /v2/models, meta_data and
// the limits follow the catalogue. Keys on a tier the new plans lack (Standard1000 after
// the next catalogue, which has Essential, Professional and Agentic) are on the default
// tier, said at boot with their count, until an admin moves them (src/limits/plans.ts).
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { parse } from 'yaml'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const dir = mkdtempSync(join(tmpdir(), 'tollgate-switch-'))
const dataDir = join(dir, 'data')

/** `tollgate plans import <export>` into a plans file; returns its path and the model names. */
async function importPlans(exportName: string): Promise<{ path: string; models: string[] }> {
  const stdout = await new Promise<string>((done, fail) => {
    execFile(
      process.execPath,
      [join(ROOT, 'src/cli.ts'), 'plans', 'import', join(ROOT, 'config/catalogue', exportName)],
      { timeout: 30_000 },
      (error, out, err) => {
        if (error) fail(new Error(`plans import ${exportName}: ${err}`))
        else done(out)
      },
    )
  })
  const path = join(dir, `${exportName}.yaml`)
  writeFileSync(path, stdout)
  const plans = parse(stdout) as { tiers: Record<string, { models: Record<string, unknown> }> }
  return { path, models: [...new Set(Object.values(plans.tiers).flatMap((tier) => Object.keys(tier.models)))] }
}

/** The models list an operator writes beside the plans: every catalogue name, on the mock. */
function modelsFor(names: readonly string[]): Array<Record<string, unknown>> {
  const kind = (name: string): string =>
    /whisper/i.test(name) ? 'audio' : /embedding/i.test(name) ? 'embedding' : /^gpt-image/.test(name) ? 'image' : 'chat'
  return names.map((name) => ({ name, kind: kind(name), deployments: [{ backend: 'mock' }] }))
}

async function boot(exportName: string): Promise<{ gw: RunningTollgate; models: string[] }> {
  const { path, models } = await importPlans(exportName)
  const gw = await startTollgate({
    dataDir,
    config: (doc) => {
      doc.plans = path
      doc.models = modelsFor(models)
    },
  })
  return { gw, models }
}

interface ModelObject {
  id: string
  meta_data: { display_name: string; max_sequence_length: number; deployment_region: string | null }
}

async function listModels(gw: RunningTollgate, key: string): Promise<ModelObject[]> {
  const res = await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}` } })
  if (res.status !== 200) throw new Error(`models: ${res.status}`)
  return ((await res.json()) as { data: ModelObject[] }).data
}

/** The requests-per-minute limit a chat call on Llama 3.3 is under, from its reply's headers. */
async function llamaRpm(gw: RunningTollgate, key: string): Promise<string | null> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 4,
    }),
  })
  await res.arrayBuffer()
  if (res.status !== 200) throw new Error(`chat: ${res.status}`)
  return res.headers.get('x-ratelimit-limit-requests')
}

const missingTierWarnings = (gw: RunningTollgate): Array<Record<string, unknown>> =>
  gw
    .logs()
    .filter((l) => l.level === 40 && typeof l.tier === 'string' && /which the plans do not have/.test(String(l.msg)))

t.test(
  'legacy → 2026-01-19 → next: models, meta_data and limits follow; keys on a vanished tier go to the default tier',
  async (t) => {
    // 1. The legacy catalogue.
    let { gw, models } = await boot('plans-legacy.json')
    t.teardown(() => gw.stop())
    const standard = await gw.createKey({ tier: 'Standard1000' })
    const basic = await gw.createKey({})
    let listed = await listModels(gw, standard.key)
    t.same(listed.map((m) => m.id).sort(), [...models].sort())
    t.ok(models.includes('Qwen2.5-VL-72B-Instruct') && !models.includes('whisper-large-v3'))
    t.equal(
      listed.find((m) => m.id === 'Llama-3.3-70B-Instruct')?.meta_data.display_name,
      'Llama-3.3-70B-Instruct',
      'the legacy export has no display names',
    )
    t.equal(await llamaRpm(gw, standard.key), '150', 'Standard1000: 150 requests a minute on Llama 3.3')
    t.equal(await llamaRpm(gw, basic.key), '20', 'Basic: 20')
    t.same(missingTierWarnings(gw), [])
    await gw.stop()

    // 2. The current catalogue: same tiers, new models, display names.
    ;({ gw } = await boot('plans-2026-01-19.json'))
    listed = await listModels(gw, standard.key)
    t.equal(listed.length, 40)
    t.ok(listed.some((m) => m.id === 'whisper-large-v3') && !listed.some((m) => m.id === 'Qwen2.5-VL-72B-Instruct'))
    t.ok(
      listed.some((m) => m.id === 'gemini-3-pro'),
      'the trimmed name',
    )
    t.equal(listed.find((m) => m.id === 'Llama-3.3-70B-Instruct')?.meta_data.display_name, 'Meta LLama 3.3 70B')
    t.equal(await llamaRpm(gw, standard.key), '150')
    t.same(missingTierWarnings(gw), [])
    await gw.stop()

    // 3. The next catalogue: Standard1000 is gone.
    ;({ gw, models } = await boot('plans-2026-04-24-next.json'))
    t.ok(models.includes('Qwen3-Coder-30B-A3B-Instruct'))
    listed = await listModels(gw, standard.key)
    t.same(listed.map((m) => m.id).sort(), [...models].sort())
    t.match(listed.find((m) => m.id === 'Llama-3.3-70B-Instruct')?.meta_data, {
      display_name: 'Llama 3.3 70B',
      max_sequence_length: 128000,
      deployment_region: 'otc-germany',
    })
    const warnings = missingTierWarnings(gw)
    t.equal(warnings.length, 1, 'one warning at boot, before listening')
    t.match(warnings[0], { tier: 'Standard1000', keys: 1, defaultTier: 'Essential' })
    const bootLine = gw.logs().findIndex((l) => l.msg === 'tollgate listening')
    t.ok(gw.logs().indexOf(warnings[0] as Record<string, unknown>) < bootLine, 'said before the gateway listens')
    t.equal(await llamaRpm(gw, standard.key), '300', 'the Standard1000 key is on Essential: 300 a minute')
    t.equal(await llamaRpm(gw, basic.key), '300', 'a key without a tier follows the default tier, Essential')
    // The admin moves the key to a tier the plans have; an unknown tier is still refused.
    const patch = (body: unknown): Promise<Response> =>
      fetch(`${gw.url}/admin/keys/${standard.id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    t.equal((await patch({ tier: 'Standard1000' })).status, 400, 'the vanished tier cannot be given anew')
    const moved = await patch({ tier: 'Professional' })
    t.equal(moved.status, 200)
    t.equal(await llamaRpm(gw, standard.key), '600', 'Professional: 600 a minute')
    await gw.stop()

    // 4. Back to the current catalogue: the key names Professional, which it lacks.
    ;({ gw } = await boot('plans-2026-01-19.json'))
    t.match(missingTierWarnings(gw)[0], { tier: 'Professional', keys: 1, defaultTier: 'Basic' })
    t.equal(await llamaRpm(gw, standard.key), '20', 'on Basic')
  },
)
