import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { readFileSync } from 'node:fs'
import { ConfigError, loadConfig } from '../../src/config/load.ts'

const DEFAULT = 'config/default.yaml'

function writeConfig(mutate: (doc: Record<string, unknown>) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'tg-config-'))
  const doc = parse(readFileSync(DEFAULT, 'utf8')) as Record<string, unknown>
  doc.plans = join(process.cwd(), 'config/plans.yaml')
  mutate(doc)
  const path = join(dir, 'config.yaml')
  writeFileSync(path, stringify(doc))
  return path
}

t.test('the default configuration loads and serves the catalogue from the mock', async (t) => {
  const config = loadConfig({ path: DEFAULT, env: {} })
  t.equal(config.server.port, 8080)
  t.equal(config.server.metricsPort, 9464)
  t.equal(config.store.redisUrl, undefined)
  t.equal(config.plans.defaultTier, 'Basic')
  t.same(Object.keys(config.plans.tiers).sort(), [
    'Basic',
    'Standard1000',
    'Standard2000',
    'Standard3000',
    'Standard4000',
  ])
  const kinds = new Set(config.models.map((m) => m.kind))
  t.same([...kinds].sort(), ['audio', 'chat', 'embedding', 'image'])
  t.ok(config.models.every((m) => m.deployments.every((d) => d.backend === 'mock')))
  // Headline figures of INTERFACE.md §3.
  t.equal(config.plans.tiers.Basic?.models['Mistral-Small-24B-Instruct-2501']?.input_tpm, 18750)
  t.equal(config.plans.tiers.Basic?.models['Mistral-Small-24B-Instruct-2501']?.rpm, 20)
  t.equal(config.plans.tiers.Standard4000?.models['Mistral-Small-24B-Instruct-2501']?.input_tpm, 150000)
  t.equal(config.plans.tiers.Standard4000?.models['Mistral-Small-24B-Instruct-2501']?.rpm, 600)
  t.ok(Object.isFrozen(config.server), 'frozen after load')
})

t.test('environment settings override the file', async (t) => {
  const config = loadConfig({
    path: DEFAULT,
    env: {
      PORT: '9000',
      METRICS_PORT: '9001',
      REDIS_URL: 'redis://127.0.0.1:6379',
      TOLLGATE_DATA_DIR: '/tmp/x',
      TOLLGATE_ADMIN_TOKEN: 'adm_0123456789abcdef0123456789abcdef',
    },
  })
  t.equal(config.server.port, 9000)
  t.equal(config.server.metricsPort, 9001)
  t.equal(config.store.redisUrl, 'redis://127.0.0.1:6379')
  t.equal(config.store.dataDir, '/tmp/x')
  t.equal(config.secrets.adminToken, 'adm_0123456789abcdef0123456789abcdef')
})

t.test("a bedrock backend's credentials come from AWS's standard variables, or those it names", async (t) => {
  const path = writeConfig((doc) => {
    ;(doc.backends as Record<string, unknown>).aws = { type: 'bedrock', region: 'eu-west-3' }
    ;(doc.backends as Record<string, unknown>).other = {
      type: 'bedrock',
      region: 'us-west-2',
      accessKeyIdEnv: 'OTHER_KEY_ID',
      secretAccessKeyEnv: 'OTHER_SECRET',
      sessionTokenEnv: 'OTHER_TOKEN',
    }
  })
  const config = loadConfig({
    path,
    env: { AWS_ACCESS_KEY_ID: 'AKIA1', AWS_SECRET_ACCESS_KEY: 's1', OTHER_KEY_ID: 'AKIA2', OTHER_SECRET: 's2' },
  })
  t.same(config.secrets.backendKeys, {
    AWS_ACCESS_KEY_ID: 'AKIA1',
    AWS_SECRET_ACCESS_KEY: 's1',
    OTHER_KEY_ID: 'AKIA2',
    OTHER_SECRET: 's2',
  })
  t.match(config.backends.aws, {
    accessKeyIdEnv: 'AWS_ACCESS_KEY_ID',
    secretAccessKeyEnv: 'AWS_SECRET_ACCESS_KEY',
    sessionTokenEnv: 'AWS_SESSION_TOKEN',
  })
})

t.test('TOLLGATE_CONFIG picks the file', async (t) => {
  const path = writeConfig((doc) => {
    ;(doc.server as Record<string, unknown>).port = 1234
  })
  t.equal(loadConfig({ env: { TOLLGATE_CONFIG: path } }).server.port, 1234)
})

t.test('a bad file is refused with the path of the bad field', async (t) => {
  const cases: Array<[string, (doc: Record<string, unknown>) => void, RegExp]> = [
    [
      'wrong type',
      (doc) => {
        ;(doc.server as Record<string, unknown>).port = 'eighty'
      },
      /server\.port/,
    ],
    [
      'unknown field',
      (doc) => {
        ;(doc.server as Record<string, unknown>).prot = 1
      },
      /server.*prot/,
    ],
    [
      'unknown backend',
      (doc) => {
        ;(doc.models as Array<Record<string, unknown>>)[0]!.deployments = [{ backend: 'nope' }]
      },
      /models\.0\.deployments\.0\.backend: unknown backend "nope"/,
    ],
    [
      'bad backend url',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: 'ftp://x' }
      },
      /backends\.up\.baseUrl/,
    ],
    [
      'api key as a value',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: 'http://x', apiKeyEnv: 'sk-123 456' }
      },
      /backends\.up\.apiKeyEnv/,
    ],
    [
      'gemini on vertex with an api key too',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).g = {
          type: 'gemini',
          apiKeyEnv: 'GEMINI_API_KEY',
          vertex: { project: 'my-project', location: 'us-central1', credentialsEnv: 'SA_JSON' },
        }
      },
      /backends\.g\.apiKeyEnv: a Vertex AI backend authenticates with its service account/,
    ],
    [
      'gemini on vertex with a bad location',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).g = {
          type: 'gemini',
          vertex: { project: 'my-project', location: 'us-central1/../x', credentialsEnv: 'SA_JSON' },
        }
      },
      /backends\.g\.vertex\.location/,
    ],
    [
      'bedrock without a region',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).b = { type: 'bedrock' }
      },
      /backends\.b\.region/,
    ],
    [
      'bedrock with a region that is not one',
      (doc) => {
        ;(doc.backends as Record<string, unknown>).b = { type: 'bedrock', region: 'us-east-1/../x' }
      },
      /backends\.b\.region: must be an AWS region/,
    ],
    [
      'duplicate model',
      (doc) => {
        const m = doc.models as unknown[]
        m.push(m[0])
      },
      /duplicate model name/,
    ],
  ]
  for (const [name, mutate, expected] of cases) {
    const path = writeConfig(mutate)
    const err = catchError(() => loadConfig({ path, env: {} }))
    t.ok(err instanceof ConfigError, `${name}: refused`)
    t.match(err?.message, expected, `${name}: names the field`)
  }
  t.throws(() => loadConfig({ path: DEFAULT, env: { PORT: 'abc' } }), /PORT: must be a whole number/)
  t.throws(() => loadConfig({ path: '/nonexistent.yaml', env: {} }), /cannot read file: no such file/)
})

t.test('a YAML mistake: where it is, the line itself and a caret under the spot', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-config-'))
  const path = join(dir, 'config.yaml')
  writeFileSync(path, 'server:\n  port: 8080\n  host: [127.0.0.1\nlogging:\n  level: info\n')
  const err = catchError(() => loadConfig({ path, env: {} })) as ConfigError
  t.ok(err instanceof ConfigError)
  t.same(
    err.problems[0]?.split('\n'),
    [
      'not valid YAML at line 4, column 1: Flow sequence in block collection must be sufficiently indented and end with a ]',
      '    4 | logging:',
      '      | ^',
    ],
    'the place and the reason (no dangling colon), the line, a caret under the spot',
  )
  t.match(err.message, 'config.yaml:\n  not valid YAML at line 4, column 1: ')
  writeFileSync(path, 'server:\n  port: 8080\n   host: x\n')
  const indented = catchError(() => loadConfig({ path, env: {} })) as ConfigError
  t.same(indented.problems[0]?.split('\n'), [
    'not valid YAML at line 2, column 9: Nested mappings are not allowed in compact mappings',
    '    2 |   port: 8080',
    '      |         ^',
  ])
})

t.test('a missing file says which setting named it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-config-'))
  const byDefault = catchError(() => loadConfig({ env: {} }))
  // (This test runs in the checkout, where config/default.yaml exists: only a stranger cwd misses it.)
  t.notOk(byDefault, 'the default file is found from the checkout')
  const named = catchError(() => loadConfig({ env: { TOLLGATE_CONFIG: join(dir, 'nope.yaml') } }))
  t.match(named?.message, `cannot read file: no such file (named by TOLLGATE_CONFIG=${join(dir, 'nope.yaml')})`)
  const cwd = process.cwd()
  process.chdir(dir)
  t.teardown(() => process.chdir(cwd))
  const elsewhere = catchError(() => loadConfig({ env: {} }))
  t.match(
    elsewhere?.message,
    'cannot read file: no such file (named by the default config/default.yaml, under the current directory',
  )
  t.match(elsewhere?.message, 'TOLLGATE_CONFIG names another file')
})

t.test('a copied default.yaml without its plans.yaml: told that plans: is read beside the file', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-config-'))
  const path = join(dir, 'my.yaml')
  writeFileSync(path, readFileSync(DEFAULT, 'utf8'))
  const err = catchError(() => loadConfig({ path, env: {} })) as ConfigError
  t.ok(err instanceof ConfigError)
  t.match(err.message, `invalid configuration in ${path}`, 'the configuration file is named')
  t.match(err.problems[0], `plans: "plans.yaml" does not exist: ${join(dir, 'plans.yaml')}`)
  t.match(err.problems[0], `read from the configuration file's folder (${dir}), not the current directory`)
  writeFileSync(join(dir, 'plans.yaml'), readFileSync('config/plans.yaml', 'utf8'))
  t.ok(loadConfig({ path, env: {} }), 'with the plans beside it, it loads')
})

function catchError(fn: () => unknown): Error | undefined {
  try {
    fn()
  } catch (err) {
    return err as Error
  }
  return undefined
}

t.test('queue settings: defaults, and a priority for a tier that does not exist is refused', async (t) => {
  const config = loadConfig({ path: DEFAULT, env: {} })
  t.equal(config.queue.maxWaitMs, 600_000)
  t.equal(config.queue.resultTtlSeconds, 86_400)
  t.same(config.queue.tierPriority, {})
  const good = writeConfig((doc) => {
    doc.queue = { tierPriority: { Standard4000: 1, Basic: 10 }, concurrency: 0 }
  })
  t.same(loadConfig({ path: good, env: {} }).queue.tierPriority, { Standard4000: 1, Basic: 10 })
  const bad = writeConfig((doc) => {
    doc.queue = { tierPriority: { Platinum: 1 } }
  })
  t.throws(() => loadConfig({ path: bad, env: {} }), /queue\.tierPriority\.Platinum: unknown tier "Platinum"/)
  const negative = writeConfig((doc) => {
    doc.queue = { maxWaitMs: -1 }
  })
  t.throws(() => loadConfig({ path: negative, env: {} }), /queue\.maxWaitMs/)
})

t.test('Redis topologies: one server, a cluster or a Sentinel set, from the file or the environment', async (t) => {
  t.equal(loadConfig({ path: DEFAULT, env: {} }).redis, undefined, 'embedded by default')
  t.same(loadConfig({ path: DEFAULT, env: { REDIS_URL: 'redis://127.0.0.1:6379' } }).redis, {
    kind: 'standalone',
    url: 'redis://127.0.0.1:6379',
  })

  const cluster = loadConfig({
    path: DEFAULT,
    env: { REDIS_CLUSTER_NODES: '10.0.0.1:7000, 10.0.0.2:7000,[::1]:7001', REDIS_PASSWORD: 'pw', REDIS_TLS: 'true' },
  })
  t.same(cluster.redis, {
    kind: 'cluster',
    nodes: [
      { host: '10.0.0.1', port: 7000 },
      { host: '10.0.0.2', port: 7000 },
      { host: '::1', port: 7001 },
    ],
    tls: true,
    auth: { password: 'pw' },
  })
  t.notMatch(JSON.stringify(cluster.store), /pw/, 'the password is not in the store section')

  const sentinel = loadConfig({
    path: DEFAULT,
    env: { REDIS_SENTINELS: 's1:26379,s2:26379', REDIS_SENTINEL_NAME: 'tollgate', REDIS_SENTINEL_PASSWORD: 'spw' },
  })
  t.same(sentinel.redis, {
    kind: 'sentinel',
    sentinels: [
      { host: 's1', port: 26379 },
      { host: 's2', port: 26379 },
    ],
    masterName: 'tollgate',
    tls: false,
    sentinelTls: false,
    auth: {},
    sentinelAuth: { password: 'spw' },
  })

  const fromFile = writeConfig((doc) => {
    ;(doc.store as Record<string, unknown>).redisSentinel = {
      sentinels: ['127.0.0.1:27200'],
      masterName: 'm',
      sentinelTls: true,
    }
  })
  t.match(loadConfig({ path: fromFile, env: {} }).redis, { kind: 'sentinel', masterName: 'm', sentinelTls: true })
  t.match(
    loadConfig({ path: fromFile, env: { REDIS_URL: 'redis://x:1' } }).redis,
    { kind: 'standalone' },
    "the environment replaces the file's topology",
  )

  const both = writeConfig((doc) => {
    Object.assign(doc.store as Record<string, unknown>, { redisUrl: 'redis://x:1', redisCluster: { nodes: ['x:2'] } })
  })
  t.throws(
    () => loadConfig({ path: both, env: {} }),
    /store: set at most one of redisUrl, redisCluster and redisSentinel/,
  )
  const badNode = writeConfig((doc) => {
    ;(doc.store as Record<string, unknown>).redisCluster = { nodes: ['no-port'] }
  })
  t.throws(() => loadConfig({ path: badNode, env: {} }), /store\.redisCluster\.nodes\.0: must be host:port/)
  t.throws(() => loadConfig({ path: DEFAULT, env: { REDIS_SENTINELS: 's1:1' } }), /REDIS_SENTINEL_NAME: required/)
  t.throws(
    () => loadConfig({ path: DEFAULT, env: { REDIS_URL: 'redis://x:1', REDIS_CLUSTER_NODES: 'x:1' } }),
    /set at most one/,
  )
  t.throws(
    () => loadConfig({ path: DEFAULT, env: { REDIS_CLUSTER_NODES: 'x:1', REDIS_TLS: 'yes' } }),
    /REDIS_TLS: must be true or false/,
  )
})
