// Loads the configuration at boot, and the same way again for each reload: YAML file, then
// the environment settings of INTERFACE.md §8 on top, validated by the schema, then
// frozen. The only module that reads process.env.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { parse as parseYaml } from 'yaml'
import type { z } from 'zod'
import { redisTargetOf } from './redis-target.ts'
import { configSchema, MIN_SECRET_LENGTH, plansSchema, type Config, type PlansConfig, type Secrets } from './schema.ts'
import { unknownPolicies } from '../guardrails/config.ts'
import { externalCheckProblems, externalSecrets } from '../guardrails/external/config.ts'

export class ConfigError extends Error {
  override readonly name = 'ConfigError'
  readonly problems: string[]
  /** The file itself is not there (a path that names nothing), not a file with bad content. */
  readonly missingFile: boolean
  constructor(source: string, problems: string[], missingFile = false) {
    super(`invalid configuration in ${source}:\n  ${problems.join('\n  ')}`)
    this.problems = problems
    this.missingFile = missingFile
  }
}

export const DEFAULT_CONFIG_PATH = 'config/default.yaml'

type Env = Readonly<Record<string, string | undefined>>

export interface LoadOptions {
  /** Defaults to process.env. */
  env?: Env
  /** Overrides TOLLGATE_CONFIG. */
  path?: string
  /** Settings that win over the environment's (`tollgate serve --port 8120`: PORT). */
  overrides?: Env
}

export function loadConfig(options: LoadOptions = {}): Config {
  return readConfigFile(options).config
}

/** A configuration as loaded, with the sha256 of the files it was read from. */
export interface LoadedConfig {
  readonly config: Config
  /** sha256 (hex) of the configuration file's bytes: what `sha256sum` prints for it. */
  readonly hash: string
  /** sha256 of the plans file when `plans:` names one; null when the plans are inline. */
  readonly plansHash: string | null
}

/**
 * Reads, validates and freezes the configuration exactly as at boot (the same function
 * runs for `tollgate reload`), each file read once: the hashes are of the bytes validated.
 */
export function readConfigFile(options: LoadOptions = {}): LoadedConfig {
  const env = { ...(options.env ?? process.env), ...options.overrides }
  const path = resolve(options.path ?? env.TOLLGATE_CONFIG ?? DEFAULT_CONFIG_PATH)
  // A missing file says which setting named it: a newcomer's first start elsewhere than the
  // checkout looks for config/default.yaml under the current directory.
  const namedBy =
    options.path !== undefined
      ? 'the path given'
      : env.TOLLGATE_CONFIG !== undefined
        ? `TOLLGATE_CONFIG=${env.TOLLGATE_CONFIG}`
        : `the default ${DEFAULT_CONFIG_PATH}, under the current directory ${process.cwd()}; TOLLGATE_CONFIG names another file`
  const bytes = readBytes(path, namedBy)
  let plansHash: string | null = null
  const config = buildConfig(parseText(bytes.toString('utf8'), path), path, env, (plansPath) => {
    const plansBytes = readBytes(plansPath)
    plansHash = sha256(plansBytes)
    return parsePlans(parseText(plansBytes.toString('utf8'), plansPath), plansPath)
  })
  return { config, hash: sha256(bytes), plansHash }
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** Validates an already-parsed document; `path` anchors the relative plans file. */
export function buildConfig(
  raw: unknown,
  path: string,
  env: Env = process.env,
  readPlans: (path: string) => PlansConfig = loadPlans,
): Config {
  const withEnv = applyEnv(raw, env, path)
  const parsed = configSchema.safeParse(withEnv)
  if (!parsed.success) throw new ConfigError(path, describe(parsed.error))
  const { plans: plansRef, ...rest } = parsed.data
  const plans = typeof plansRef === 'string' ? readPlansBeside(path, plansRef, readPlans) : plansRef
  const unknownTiers = Object.keys(rest.queue.tierPriority).filter((tier) => !(tier in plans.tiers))
  if (unknownTiers.length > 0)
    throw new ConfigError(
      path,
      unknownTiers.map((tier) => `queue.tierPriority.${tier}: unknown tier "${tier}"`),
    )
  const unknownPolicyNames = unknownPolicies(rest.guardrails, plans.tiers)
  if (unknownPolicyNames.length > 0) throw new ConfigError(path, unknownPolicyNames)
  const externalProblems = externalCheckProblems(rest.guardrails, rest.backends, env)
  if (externalProblems.length > 0) throw new ConfigError(path, externalProblems)
  const redis = redisTargetOf(rest.store, {
    username: env.REDIS_USERNAME || undefined,
    password: env.REDIS_PASSWORD || undefined,
    sentinelUsername: env.REDIS_SENTINEL_USERNAME || undefined,
    sentinelPassword: env.REDIS_SENTINEL_PASSWORD || undefined,
  })
  const secrets = { ...readSecrets(rest.backends, env, path), guardrailSecrets: externalSecrets(rest.guardrails, env) }
  const config: Config = { ...rest, plans, redis, secrets, source: path }
  return deepFreeze(config)
}

/**
 * `plans:` names a file relative to the configuration file, not to the current directory: a
 * copy of config/default.yaml elsewhere finds no plans.yaml beside it, and is told so.
 */
function readPlansBeside(configPath: string, plansRef: string, readPlans: (path: string) => PlansConfig): PlansConfig {
  const plansPath = resolve(dirname(configPath), plansRef)
  try {
    return readPlans(plansPath)
  } catch (err) {
    if (!(err instanceof ConfigError) || !err.missingFile) throw err
    throw new ConfigError(
      configPath,
      [
        `plans: "${plansRef}" does not exist: ${plansPath}. A relative plans path is read from the configuration file's folder (${dirname(configPath)}), not the current directory: ` +
          'copy the plans file beside the configuration file, or give plans: an absolute path.',
      ],
      true,
    )
  }
}

export function loadPlans(path: string): PlansConfig {
  return parsePlans(parseText(readBytes(path).toString('utf8'), path), path)
}

function parsePlans(raw: unknown, path: string): PlansConfig {
  const parsed = plansSchema.safeParse(raw)
  if (!parsed.success) throw new ConfigError(path, describe(parsed.error))
  return parsed.data
}

function readBytes(path: string, namedBy?: string): Buffer {
  try {
    return readFileSync(path)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    const why = code === 'ENOENT' ? 'no such file' : (code ?? String(err))
    throw new ConfigError(
      path,
      [`cannot read file: ${why}${namedBy === undefined ? '' : ` (named by ${namedBy})`}`],
      code === 'ENOENT',
    )
  }
}

function parseText(text: string, path: string): unknown {
  try {
    return parseYaml(text)
  } catch (err) {
    throw new ConfigError(path, [yamlProblem(err as YamlError, text)])
  }
}

/** What the yaml package's parse errors carry besides their message. */
type YamlError = Error & { readonly linePos?: ReadonlyArray<{ readonly line: number; readonly col: number }> }

/**
 * The YAML parser's complaint, where it is, and the line itself with a caret under the spot:
 * one problem (a reload's reply lists problems), its excerpt on lines of its own.
 */
function yamlProblem(err: YamlError, text: string): string {
  // The parser's first line ends in "at line L, column C:" before an excerpt of its own.
  const reason = (err.message.split('\n')[0] ?? '').replace(/\s*at line \d+, column \d+:?\s*$/, '').replace(/:$/, '')
  const at = err.linePos?.[0]
  if (at === undefined) return `not valid YAML: ${reason}`
  const line = text.split(/\r?\n/)[at.line - 1] ?? ''
  const gutter = String(at.line)
  return [
    `not valid YAML at line ${at.line}, column ${at.col}: ${reason}`,
    `    ${gutter} | ${line}`,
    `    ${' '.repeat(gutter.length)} | ${' '.repeat(Math.max(0, at.col - 1))}^`,
  ].join('\n')
}

function applyEnv(raw: unknown, env: Env, path: string): unknown {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigError(path, ['(root): must be a mapping'])
  }
  const doc = structuredClone(raw) as Record<string, unknown>
  const section = (name: string): Record<string, unknown> => {
    const value = doc[name]
    if (value === undefined || value === null) return (doc[name] = {})
    if (typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(path, [`${name}: must be a mapping`])
    return value as Record<string, unknown>
  }
  const intFrom = (name: string): number | undefined => {
    const value = env[name]
    if (value === undefined || value === '') return undefined
    if (!/^\d+$/.test(value))
      throw new ConfigError(path, [`${name}: must be a whole number, got "${value.slice(0, 40)}"`])
    return Number(value)
  }
  if (env.HOST) section('server').host = env.HOST
  if (env.METRICS_HOST) section('server').metricsHost = env.METRICS_HOST
  const port = intFrom('PORT')
  if (port !== undefined) section('server').port = port
  const metricsPort = intFrom('METRICS_PORT')
  if (metricsPort !== undefined) section('server').metricsPort = metricsPort
  applyRedisEnv(section('store'), env, path)
  if (env.TOLLGATE_DATA_DIR) section('store').dataDir = env.TOLLGATE_DATA_DIR
  if (env.LOG_LEVEL) section('logging').level = env.LOG_LEVEL
  // OpenTelemetry's own switch wins over the file: the SDK is then not loaded at all.
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') section('tracing').enabled = false
  return doc
}

/**
 * The environment picks the topology and replaces whichever the file names: REDIS_URL
 * (one server), REDIS_CLUSTER_NODES (host:port,...), or REDIS_SENTINELS (host:port,...)
 * with REDIS_SENTINEL_NAME. REDIS_TLS (true/false) applies to a cluster or a Sentinel set.
 */
function applyRedisEnv(store: Record<string, unknown>, env: Env, path: string): void {
  const list = (value: string): string[] =>
    value
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
  const chosen = [env.REDIS_URL, env.REDIS_CLUSTER_NODES, env.REDIS_SENTINELS].filter((v) => v).length
  if (chosen > 1)
    throw new ConfigError(path, ['REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS: set at most one of them'])
  const tls = env.REDIS_TLS === undefined || env.REDIS_TLS === '' ? undefined : env.REDIS_TLS
  if (tls !== undefined && tls !== 'true' && tls !== 'false')
    throw new ConfigError(path, [`REDIS_TLS: must be true or false, got "${tls.slice(0, 20)}"`])
  const section = (name: string): Record<string, unknown> => {
    const value = store[name]
    return typeof value === 'object' && value !== null && !Array.isArray(value)
      ? { ...(value as Record<string, unknown>) }
      : {}
  }
  const only = (name: 'redisUrl' | 'redisCluster' | 'redisSentinel', value: unknown): void => {
    delete store.redisUrl
    delete store.redisCluster
    delete store.redisSentinel
    store[name] = value
  }
  if (env.REDIS_URL) only('redisUrl', env.REDIS_URL)
  else if (env.REDIS_CLUSTER_NODES)
    only('redisCluster', { ...section('redisCluster'), nodes: list(env.REDIS_CLUSTER_NODES) })
  else if (env.REDIS_SENTINELS) {
    const masterName = env.REDIS_SENTINEL_NAME || section('redisSentinel').masterName
    if (masterName === undefined)
      throw new ConfigError(path, [
        'REDIS_SENTINEL_NAME: required with REDIS_SENTINELS (the master name the sentinels monitor)',
      ])
    only('redisSentinel', { ...section('redisSentinel'), sentinels: list(env.REDIS_SENTINELS), masterName })
  }
  if (tls !== undefined) {
    for (const name of ['redisCluster', 'redisSentinel']) {
      if (store[name] !== undefined) store[name] = { ...section(name), tls: tls === 'true' }
    }
  }
}

function readSecrets(backends: Config['backends'], env: Env, path: string): Secrets {
  const backendKeys: Record<string, string> = {}
  for (const backend of Object.values(backends)) {
    for (const name of secretEnvNames(backend)) {
      const value = env[name]
      if (value) backendKeys[name] = value
    }
  }
  const named = {
    TOLLGATE_ADMIN_TOKEN: env.TOLLGATE_ADMIN_TOKEN || undefined,
    TOLLGATE_KEY_SECRET: env.TOLLGATE_KEY_SECRET || undefined,
    TOLLGATE_JWT_SECRET: env.TOLLGATE_JWT_SECRET || undefined,
  }
  return {
    adminToken: named.TOLLGATE_ADMIN_TOKEN,
    keyHashSecret: named.TOLLGATE_KEY_SECRET,
    jwtSecret: named.TOLLGATE_JWT_SECRET,
    backendKeys,
    weak: weakSecrets(named, env, path),
  }
}

/** The env vars holding a backend's secrets. */
function secretEnvNames(backend: Config['backends'][string]): string[] {
  switch (backend.type) {
    case 'mock':
      return []
    case 'bedrock':
      return [backend.accessKeyIdEnv, backend.secretAccessKeyEnv, backend.sessionTokenEnv]
    case 'gemini':
      if (backend.vertex) return [backend.vertex.credentialsEnv]
      return backend.apiKeyEnv === undefined ? [] : [backend.apiKeyEnv]
    default:
      return backend.apiKeyEnv === undefined ? [] : [backend.apiKeyEnv]
  }
}

/**
 * A guessable admin token or hashing secret is worse than none: refused below
 * MIN_SECRET_LENGTH characters (docs/troubleshooting.md's "32+ random characters": 192 bits and more as
 * base64), unless TOLLGATE_ALLOW_WEAK_SECRETS says this is a development machine; then the
 * names are returned, for a warning at start. The values never appear in a message.
 */
function weakSecrets(named: Readonly<Record<string, string | undefined>>, env: Env, path: string): string[] {
  const weak = Object.entries(named).filter(([, value]) => value !== undefined && value.length < MIN_SECRET_LENGTH)
  if (weak.length === 0) return []
  const allow = env.TOLLGATE_ALLOW_WEAK_SECRETS
  if (allow === '1' || allow === 'true') return weak.map(([name]) => name)
  throw new ConfigError(
    path,
    weak.map(
      ([name, value]) =>
        `${name}: too short (${value?.length ?? 0} character${value?.length === 1 ? '' : 's'}); use at least ${MIN_SECRET_LENGTH} random characters, e.g. \`openssl rand -base64 32\` ` +
        '(TOLLGATE_ALLOW_WEAK_SECRETS=1 lets a shorter one through, for development only)',
    ),
  )
}

function describe(error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const where = issue.path.length ? issue.path.map(String).join('.') : '(root)'
    return `${where}: ${issue.message}`
  })
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const child of Object.values(value)) deepFreeze(child)
  }
  return value
}
