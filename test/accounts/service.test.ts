// AccountService on the embedded store: the password is only a scrypt hash, logins check
// it, and an unknown user costs the same hashing as a wrong password.
import t from 'tap'
import type { Test } from 'tap'
import { AccountService } from '../../src/accounts/service.ts'
import { verifyPassword } from '../../src/accounts/password.ts'
import { GatewayError } from '../../src/errors.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'

function service(t: Test): { accounts: AccountService; changed: string[] } {
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  const changed: string[] = []
  return { accounts: new AccountService({ store: stores.accounts, onChange: (u) => changed.push(u) }), changed }
}

t.test('create keeps a scrypt hash, never the password; defaults for roles, groups, tenant', async (t) => {
  const { accounts } = service(t)
  const record = await accounts.create({ username: 'alice', password: 'correct horse' })
  t.match(record.passwordHash, /^scrypt\$15\$8\$1\$[\w-]{22}\$[\w-]{43}$/)
  t.notMatch(JSON.stringify(record), /correct horse/)
  t.strictSame([record.roles, record.groups, record.tenant, record.disabled], [[], [], 'default', false])
  t.ok(await verifyPassword('correct horse', record.passwordHash))
  t.notOk(await verifyPassword('correct horsE', record.passwordHash))
  t.notMatch(JSON.stringify(accounts.view(record)), /scrypt|passwordHash/)
  const taken = await accounts.create({ username: 'alice', password: 'another one' }).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(taken instanceof GatewayError && taken.status === 409 && taken.param === 'username', 'a taken username is a 409')
})

t.test('bad bodies are 400s naming the field, and never echo the password', async (t) => {
  const { accounts } = service(t)
  for (const [body, param] of [
    [{ username: 'a b', password: 'long enough' }, 'username'],
    [{ username: 'bob', password: 'short' }, 'password'],
    [{ username: 'bob', password: 'long enough', roles: ['ok', 'not ok'] }, 'roles.1'],
    [{ username: 'bob', password: 'long enough', extra: 1 }, null],
  ] as const) {
    const error = await accounts.create(body).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(
      error instanceof GatewayError && error.status === 400 && error.param === param,
      `${JSON.stringify(body)} → 400 ${param}`,
    )
    t.notMatch(String((error as Error).message), /long enough|short/)
  }
})

t.test('update changes roles, groups, tenant, disabled and the password; a new password ends sessions', async (t) => {
  const { accounts, changed } = service(t)
  const before = await accounts.create({ username: 'carol', password: 'first password', roles: ['user'] })
  await new Promise((done) => setTimeout(done, 5))
  const after = await accounts.update('carol', {
    roles: ['admin', 'admin', 'user'],
    groups: ['g'],
    tenant: 't1',
    disabled: true,
    password: 'second password',
  })
  t.strictSame([after.roles, after.groups, after.tenant, after.disabled], [['admin', 'user'], ['g'], 't1', true])
  t.ok(after.sessionsValidFrom > before.sessionsValidFrom)
  t.ok(await verifyPassword('second password', after.passwordHash))
  t.strictSame(changed, ['carol'])
  const roleOnly = await accounts.update('carol', { roles: [] })
  t.equal(roleOnly.sessionsValidFrom, after.sessionsValidFrom, 'no new password, sessions stay')
  await t.rejects(accounts.update('nobody', { roles: [] }), { name: 'GatewayError', status: 404 })
  await accounts.remove('carol')
  t.equal(await accounts.get('carol'), null)
  await t.rejects(accounts.remove('carol'), { name: 'GatewayError', status: 404 })
})

t.test(
  'checkLogin: right password only, not when disabled; unknown user takes as long as a wrong password',
  async (t) => {
    const { accounts } = service(t)
    await accounts.create({ username: 'dave', password: 'dave password' })
    t.equal((await accounts.checkLogin('dave', 'dave password'))?.username, 'dave')
    t.equal(await accounts.checkLogin('dave', 'wrong password'), null)
    t.equal(await accounts.checkLogin('nobody', 'dave password'), null)
    t.equal(await accounts.checkLogin('not a name!', 'dave password'), null)
    await accounts.update('dave', { disabled: true })
    t.equal(await accounts.checkLogin('dave', 'dave password'), null)

    const time = async (name: string): Promise<number> => {
      const samples: number[] = []
      for (let i = 0; i < 5; i++) {
        const start = performance.now()
        await accounts.checkLogin(name, 'wrong password')
        samples.push(performance.now() - start)
      }
      return samples.sort((a, b) => a - b)[2] ?? 0
    }
    const wrong = await time('dave')
    const unknown = await time('nobody')
    t.ok(wrong > 10 && unknown > 10, `both hash (median ${wrong.toFixed(1)} ms and ${unknown.toFixed(1)} ms)`)
    t.ok(unknown / wrong > 0.33 && unknown / wrong < 3, 'within a factor of 3 of each other')
  },
)
