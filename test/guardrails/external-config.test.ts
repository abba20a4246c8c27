// External checks in the configuration file: refused at load with the path of the bad
// field when a check leaves its failure handling unsaid, names a backend that is not an
// openai one, or a signing secret that is not set; the secret is read from the environment
// with the file and never written into the configuration itself.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { stringify, parse } from 'yaml'
import { ConfigError, loadConfig } from '../../src/config/load.ts'

const SECRET = 'whsec_c2lnbmluZy1zZWNyZXQtZm9yLXRoZS10ZXN0cw=='
const hook = {
  name: 'dlp',
  type: 'webhook',
  url: 'https://dlp.example/check',
  secretEnv: 'DLP_SECRET',
  onError: 'closed',
}
const moderation = { name: 'mod', type: 'moderation', backend: 'openai_mod', onError: 'open' }

function load(external: unknown[], env: Record<string, string> = { DLP_SECRET: SECRET }) {
  const doc = parse(readFileSync('config/default.yaml', 'utf8')) as Record<string, unknown>
  doc.plans = join(process.cwd(), 'config/plans.yaml')
  doc.backends = { ...(doc.backends as object), openai_mod: { type: 'openai', baseUrl: 'https://api.example/v1' } }
  doc.guardrails = { policies: { p: { external } } }
  const path = join(mkdtempSync(join(tmpdir(), 'tg-guard-')), 'config.yaml')
  writeFileSync(path, stringify(doc))
  return loadConfig({ path, env })
}

function problems(external: unknown[], env?: Record<string, string>): string[] {
  try {
    load(external, env)
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}

t.test('a valid pair of checks loads, with defaults, and the secret read from the environment', async (t) => {
  const config = load([moderation, hook])
  const [mod, dlp] = config.guardrails.policies.p!.external
  t.match(mod, { type: 'moderation', model: 'omni-moderation-latest', flagged: true, timeoutMs: 2000, onError: 'open' })
  t.match(dlp, { type: 'webhook', timeoutMs: 2000, onError: 'closed', secretEnv: 'DLP_SECRET' })
  t.same(config.secrets.guardrailSecrets, { DLP_SECRET: SECRET })
  t.notOk(JSON.stringify(config.guardrails).includes(SECRET), 'the file keeps the name, not the secret')
})

t.test('refused at load, each with its path', async (t) => {
  const { onError: _, ...unsaid } = hook
  t.match(problems([unsaid]), [/guardrails\.policies\.p\.external\.0\.onError/])
  t.match(problems([hook], {}), ['guardrails.policies.p.external.0.secretEnv: DLP_SECRET is not set'])
  t.match(problems([{ ...moderation, backend: 'nowhere' }]), [/external\.0\.backend: unknown backend "nowhere"/])
  t.match(problems([{ ...moderation, backend: 'mock' }]), [/external\.0\.backend: "mock" is a mock backend/])
  t.match(problems([{ ...moderation, flagged: false }]), [/external\.0\.flagged: blocks on nothing/])
  t.match(problems([{ ...moderation, thresholds: { violence: 1.5 } }]), [/external\.0\.thresholds\.violence/])
  t.match(problems([hook, hook]), [/external\.1\.name: a second check named "dlp"/])
  t.match(problems([{ ...hook, url: 'ftp://dlp.example' }]), [/external\.0\.url/])
  t.match(problems([{ ...hook, timeoutMs: 0 }]), [/external\.0\.timeoutMs/])
})
