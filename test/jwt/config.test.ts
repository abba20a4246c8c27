// The ragAuth configuration: its defaults, and values refused at boot with the field's path.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { ConfigError, loadConfig } from '../../src/config/load.ts'

const DEFAULT = 'config/default.yaml'

function withRagAuth(ragAuth: unknown): string {
  const doc = parse(readFileSync(DEFAULT, 'utf8')) as Record<string, unknown>
  doc.plans = join(process.cwd(), 'config/plans.yaml')
  doc.ragAuth = ragAuth
  const path = join(mkdtempSync(join(tmpdir(), 'tg-ragauth-')), 'config.yaml')
  writeFileSync(path, stringify(doc))
  return path
}

t.test('defaults', async (t) => {
  const { ragAuth } = loadConfig({ path: DEFAULT, env: {} })
  t.strictSame(ragAuth, {
    issuer: 'tollgate',
    audience: 'tollgate-rag',
    accessTokenTtlSeconds: 900,
    refreshTokenTtlSeconds: 604_800,
    refreshReuseSeconds: 5,
    signingKeyRotationSeconds: 86_400,
    revocationCacheMs: 500,
    loginThrottle: {
      maxFailuresPerUserAddress: 5,
      maxFailuresPerAddress: 20,
      maxFailuresPerUsername: 5,
      slowdownMs: 250,
      maxSlowdownMs: 3000,
      windowSeconds: 900,
      blockSeconds: 900,
    },
  })
  const oidc = loadConfig({
    path: withRagAuth({
      oidc: { issuer: 'https://idp.example/realms/r', audience: 'rag', jwksUrl: 'https://idp.example/certs' },
    }),
    env: {},
  }).ragAuth.oidc
  t.match(oidc, {
    algorithms: ['RS256', 'ES256', 'EdDSA'],
    jwksCooldownMs: 30_000,
    defaultTenant: 'default',
    claims: { userId: 'sub', username: 'preferred_username', roles: 'roles', groups: 'groups', tenant: 'tenant' },
  })
})

t.test('bad values are refused with the path of the field', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ revocationCacheMs: 5000 }, /ragAuth\.revocationCacheMs/],
    [{ accessTokenTtlSeconds: 0 }, /ragAuth\.accessTokenTtlSeconds/],
    [{ loginThrottle: { maxFailuresPerUsername: -1 } }, /ragAuth\.loginThrottle\.maxFailuresPerUsername/],
    [{ loginThrottle: { maxFailuresPerUserAddress: 0 } }, /ragAuth\.loginThrottle\.maxFailuresPerUserAddress/],
    [{ loginThrottle: { maxSlowdownMs: 600_000 } }, /ragAuth\.loginThrottle\.maxSlowdownMs/],
    [{ refreshReuseSeconds: 3600 }, /ragAuth\.refreshReuseSeconds/],
    [
      { oidc: { issuer: 'tollgate', audience: 'a', jwksUrl: 'https://idp.example/certs' } },
      /ragAuth\.oidc\.issuer: must differ/,
    ],
    [
      { oidc: { issuer: 'https://idp.example', audience: 'a', jwksUrl: 'ftp://idp.example/certs' } },
      /ragAuth\.oidc\.jwksUrl/,
    ],
    [
      {
        oidc: {
          issuer: 'https://idp.example',
          audience: 'a',
          jwksUrl: 'https://idp.example/certs',
          algorithms: ['none'],
        },
      },
      /ragAuth\.oidc\.algorithms/,
    ],
    [
      {
        oidc: {
          issuer: 'https://idp.example',
          audience: 'a',
          jwksUrl: 'https://idp.example/certs',
          claims: { roles: 'a b' },
        },
      },
      /ragAuth\.oidc\.claims\.roles/,
    ],
    [{ unknownSetting: 1 }, /ragAuth/],
  ]
  for (const [ragAuth, message] of cases) {
    const error = (() => {
      try {
        loadConfig({ path: withRagAuth(ragAuth), env: {} })
        return null
      } catch (e) {
        return e
      }
    })()
    t.ok(error instanceof ConfigError, `${JSON.stringify(ragAuth)} is refused`)
    t.match(String((error as Error).message), message)
  }
})
