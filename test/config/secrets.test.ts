// TOLLGATE_ADMIN_TOKEN, TOLLGATE_KEY_SECRET and TOLLGATE_JWT_SECRET shorter than 32
// characters are refused (a guessable admin token or hashing secret is worse than none),
// unless TOLLGATE_ALLOW_WEAK_SECRETS says this is a development machine: then the gateway
// warns. The values never appear in a message.
import { spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import t from 'tap'
import { ConfigError, loadConfig } from '../../src/config/load.ts'
import { MIN_SECRET_LENGTH } from '../../src/config/schema.ts'
import { startTollgate } from '../helpers/gateway.ts'

const ROOT = resolve(import.meta.dirname, '../..')
const DEFAULT = join(ROOT, 'config/default.yaml')
const NAMES = ['TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_KEY_SECRET', 'TOLLGATE_JWT_SECRET'] as const

t.test('the documented length: 32 characters', async (t) => {
  t.equal(MIN_SECRET_LENGTH, 32)
})

t.test('each secret under 32 characters is refused, by name, without its value', async (t) => {
  for (const name of NAMES) {
    const short = 'y'.repeat(31)
    const error = t.throws(() => loadConfig({ path: DEFAULT, env: { [name]: short } })) as unknown
    t.ok(error instanceof ConfigError, `${name}: a configuration error`)
    const message = (error as Error).message
    t.match(message, `${name}: too short (31 characters); use at least 32 random characters`)
    t.match(message, /TOLLGATE_ALLOW_WEAK_SECRETS=1/, 'names the way out for development')
    t.notMatch(message, short, 'not the value')
    t.equal(
      loadConfig({ path: DEFAULT, env: { [name]: 'y'.repeat(32) } }).secrets.weak.length,
      0,
      `${name}: 32 characters are enough`,
    )
  }
  const all = t.throws(() =>
    loadConfig({ path: DEFAULT, env: { TOLLGATE_ADMIN_TOKEN: 'x', TOLLGATE_KEY_SECRET: 'y' } }),
  ) as unknown
  t.same(
    (all as ConfigError).problems.map((p) => p.split(':')[0]),
    ['TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_KEY_SECRET'],
    'every short one is named at once',
  )
})

t.test('TOLLGATE_ALLOW_WEAK_SECRETS=1 lets them through, named for a warning', async (t) => {
  const config = loadConfig({
    path: DEFAULT,
    env: {
      TOLLGATE_ADMIN_TOKEN: 'x',
      TOLLGATE_KEY_SECRET: 'y',
      TOLLGATE_JWT_SECRET: 'z'.repeat(40),
      TOLLGATE_ALLOW_WEAK_SECRETS: '1',
    },
  })
  t.equal(config.secrets.adminToken, 'x')
  t.same(config.secrets.weak, ['TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_KEY_SECRET'])
  t.throws(
    () => loadConfig({ path: DEFAULT, env: { TOLLGATE_ADMIN_TOKEN: 'x', TOLLGATE_ALLOW_WEAK_SECRETS: '0' } }),
    /too short/,
    '0 does not allow them',
  )
})

t.test('the gateway: refuses to start on a short secret; with the development setting, starts and warns', async (t) => {
  const refused = spawnSync(process.execPath, [join(ROOT, 'src/cli.ts'), 'serve'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 20_000,
    env: {
      PATH: process.env.PATH ?? '',
      TOLLGATE_DATA_DIR: join(mkdtempSync(join(tmpdir(), 'tg-secrets-')), 'data'),
      PORT: '0',
      METRICS_PORT: '0',
      TOLLGATE_KEY_SECRET: 'y',
    },
  })
  t.equal(refused.status, 2, 'exit 2')
  t.match(refused.stderr, /TOLLGATE_KEY_SECRET: too short \(1 character\)/)

  const gw = await startTollgate({ adminToken: 'x', env: { TOLLGATE_ALLOW_WEAK_SECRETS: '1' } })
  t.teardown(() => gw.stop())
  const warning = gw
    .logs()
    .find((l) => typeof l.msg === 'string' && l.msg.startsWith('TOLLGATE_ALLOW_WEAK_SECRETS is set'))
  t.equal(warning?.level, 40, 'a warning at start')
  t.same(warning?.secrets, ['TOLLGATE_ADMIN_TOKEN'], 'naming the short one')
  t.notMatch(gw.output(), /"x"/, 'not its value')
  t.equal(
    (await fetch(`${gw.url}/admin/keys`, { headers: { authorization: 'Bearer x' } })).status,
    200,
    'and the short token works there',
  )
})
