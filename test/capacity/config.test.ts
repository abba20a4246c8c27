// A deployment's declared capacity in the config (rpm, tpm, maxConcurrent, window): accepted as
// positive whole numbers, refused otherwise with the path of the bad field, and turned into
// the declarations the capacity layer keys by deployment id (backend/upstream model), where
// two public models served by one upstream deployment share one quota.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { declarationsOf, poolsOf } from '../../src/capacity/create.ts'
import { deploymentIdOf } from '../../src/capacity/ids.ts'
import { ConfigError, loadConfig } from '../../src/config/load.ts'

const DEFAULT = 'config/default.yaml'

function configWith(deployments: unknown[], second?: unknown[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'tg-capacity-config-'))
  const doc = parse(readFileSync(DEFAULT, 'utf8')) as Record<string, unknown>
  doc.plans = join(process.cwd(), 'config/plans.yaml')
  const models = doc.models as Array<{ deployments: unknown[] }>
  ;(models[0] as { deployments: unknown[] }).deployments = deployments
  if (second !== undefined) (models[1] as { deployments: unknown[] }).deployments = second
  const path = join(dir, 'config.yaml')
  writeFileSync(path, stringify(doc))
  return path
}

t.test('deploymentIdOf: backend/upstream model, or backend/* without one', async (t) => {
  t.equal(deploymentIdOf({ backend: 'azure-east', upstreamModel: 'gpt-4o' }), 'azure-east/gpt-4o')
  t.equal(deploymentIdOf({ backend: 'mock', upstreamModel: null }), 'mock/*')
})

t.test('rpm, tpm and maxConcurrent load, and become declarations by deployment id', async (t) => {
  const config = loadConfig({
    path: configWith(
      [
        { backend: 'mock', model: 'shared', rpm: 300, tpm: 50_000 },
        { backend: 'mock', model: 'solo', maxConcurrent: 4, weight: 2 },
      ],
      [{ backend: 'mock', model: 'shared' }],
    ),
    env: {},
  })
  const first = config.models[0]?.deployments[0]
  t.equal(first?.rpm, 300)
  t.equal(first?.tpm, 50_000)
  t.equal(first?.maxConcurrent, undefined)
  const declarations = declarationsOf(config.models)
  t.same(declarations['mock/shared'], { weight: 1, rpm: 300, tpm: 50_000 }, 'the shared deployment keeps its quota')
  t.same(declarations['mock/solo'], { weight: 2, maxConcurrent: 4 })
})

t.test(
  "window: fixed reaches the deployment's declaration; absent, none (the capacity's default is sliding)",
  async (t) => {
    const config = loadConfig({
      path: configWith([
        { backend: 'mock', model: 'fixed', rpm: 60, window: 'fixed' },
        { backend: 'mock', model: 'plain', rpm: 60 },
      ]),
      env: {},
    })
    const declarations = declarationsOf(config.models)
    t.same(declarations['mock/fixed'], { weight: 1, rpm: 60, window: 'fixed' })
    t.same(declarations['mock/plain'], { weight: 1, rpm: 60 })
  },
)

t.test('pools: the deployments models choose among together, joined through shared ones', async (t) => {
  const model = (name: string, ...deployments: Array<[string, string?]>) => ({
    name,
    deployments: deployments.map(([backend, upstream]) => ({
      backend,
      ...(upstream === undefined ? {} : { model: upstream }),
    })),
  })
  const pools = poolsOf([
    model('gpt-4o', ['azure-west'], ['azure-east']),
    model('gpt-4o-mini', ['openai']),
    model('mini-too', ['openai', 'gpt-4o-mini'], ['azure-north', 'gpt-4o-mini']),
    model('solo', ['vllm']),
    // Shares azure-east/gpt-4o with the first: one pool of three, whatever the order.
    model('gpt-4o-eu', ['azure-fr', 'gpt-4o'], ['azure-east', 'gpt-4o']),
  ])
  t.strictSame(pools, {
    'azure-west/gpt-4o': 'azure-east/gpt-4o',
    'azure-east/gpt-4o': 'azure-east/gpt-4o',
    'azure-fr/gpt-4o': 'azure-east/gpt-4o',
    'openai/gpt-4o-mini': 'azure-north/gpt-4o-mini',
    'azure-north/gpt-4o-mini': 'azure-north/gpt-4o-mini',
    'vllm/solo': 'vllm/solo',
  })
  const reversed = poolsOf([
    model('gpt-4o-eu', ['azure-fr', 'gpt-4o'], ['azure-east', 'gpt-4o']),
    model('gpt-4o', ['azure-west'], ['azure-east']),
  ])
  t.equal(reversed['azure-west/gpt-4o'], 'azure-east/gpt-4o', 'named by its first id in sort order, not by listing')
})

t.test('a bad value is refused with the path of the field', async (t) => {
  for (const [field, value] of [
    ['rpm', 0],
    ['tpm', -5],
    ['maxConcurrent', 1.5],
    ['rpm', 'many'],
    ['window', 'rolling'],
  ] as const) {
    let error: unknown
    try {
      loadConfig({ path: configWith([{ backend: 'mock', [field]: value }]), env: {} })
    } catch (err) {
      error = err
    }
    t.ok(error instanceof ConfigError, `${field}: ${JSON.stringify(value)} refused`)
    t.match((error as Error).message, new RegExp(`models\\.0\\.deployments\\.0\\.${field}`))
  }
})
