// The file quota contract on the shared Redis (under a random prefix, deleted at the end).
import t, { type Test } from 'tap'
import { migrateFileQuota } from '../../src/files/quota-migration.ts'
import { createRedisFileQuotaStore, fileQuotaKeys } from '../../src/files/redis-quota-store.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { keysUnder, REDIS_URL, testNamespace } from '../helpers/redis.ts'
import { fileQuotaContract } from './quota-contract.ts'

const { admin, fresh } = testNamespace(t, 'fq', 'tgtest-fq')

const space = async () => {
  const { prefix, cleanup } = fresh()
  return {
    open: async (now: () => number) =>
      createRedisFileQuotaStore(
        createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-fq' }),
        prefix,
        now,
      ),
    prefix,
    cleanup,
  }
}

fileQuotaContract(t, 'redis', space)

/** A store on a fresh space, closed (and the space deleted) when the test ends. */
async function openStore(t: Test) {
  const s = await space()
  const store = await s.open(Date.now)
  t.teardown(async () => {
    await store.close()
    await s.cleanup()
  })
  return { store, prefix: s.prefix }
}

t.test("redis: a key's counts on its own slot; only the index of files in {tg}", async (t) => {
  const { store, prefix } = await openStore(t)
  await store.hold('key_a', 'h', 10, { files: 5, bytes: 100 }, 60_000)
  await store.commit('key_a', 'h', 'file-x', 10)
  await store.hold('key_a', 'h2', 10, { files: 5, bytes: 100 }, 60_000)
  const keys = (await keysUnder(admin, prefix)).sort()
  t.strictSame(keys, [
    `${prefix}{k:key_a}:fq:files`,
    `${prefix}{k:key_a}:fq:holds`,
    `${prefix}{k:key_a}:fq:total`,
    `${prefix}{tg}:fq:of:file-x`,
  ])
})

t.test('redis: files counted under {tg} by a Tollgate before #25 are carried over once, online', async (t) => {
  const { store, prefix } = await openStore(t)
  const k = fileQuotaKeys(prefix)
  // As such a Tollgate left them: two files of key a (one also counted already in the new
  // place, as by a migration cut off halfway), one of key b, a total with no files left.
  await admin.hset(k.old.files('key a'), { 'file-1': 10, 'file-2': 20 })
  await admin.hset(k.old.total('key a'), { n: 2, b: 30 })
  await admin.hset(k.old.files('key_b'), { 'file-3': 5 })
  await admin.hset(k.old.total('key_b'), { n: 1, b: 5 })
  await admin.hset(k.old.total('key_c'), { n: 0, b: 0 })
  for (const [file, key] of [
    ['file-1', 'key a'],
    ['file-2', 'key a'],
    ['file-3', 'key_b'],
  ] as const)
    await admin.set(k.of(file), key)
  await store.hold('key a', 'h', 20, { files: 9, bytes: 99 }, 60_000)
  await store.commit('key a', 'h', 'file-2', 20)

  const log = createLogger('silent')
  const runs = await Promise.all([0, 1, 2].map(() => migrateFileQuota(admin, prefix, log)))
  t.equal(
    runs.reduce((a, b) => a + b, 0),
    3,
    'three instances at once: each file moved by one',
  )
  t.equal(await migrateFileQuota(admin, prefix, log), 0, 'a second start finds nothing')
  t.strictSame(await store.usage('key a'), { files: 2, bytes: 30 }, 'counted once each')
  t.strictSame(await store.usage('key_b'), { files: 1, bytes: 5 })
  t.strictSame(
    (await keysUnder(admin, `${prefix}{tg}:`)).sort(),
    ['file-1', 'file-2', 'file-3'].map((f) => k.of(f)).sort(),
    'nothing left under {tg} but the index of files',
  )
  await store.release('file-3')
  t.strictSame(await store.usage('key_b'), { files: 0, bytes: 0 }, 'a moved file is given back where it went')
})

t.test('redis: a file deleted before it is carried over is given back in the old place too', async (t) => {
  const { store, prefix } = await openStore(t)
  const k = fileQuotaKeys(prefix)
  await admin.hset(k.old.files('key_a'), { 'file-1': 10 })
  await admin.hset(k.old.total('key_a'), { n: 1, b: 10 })
  await admin.set(k.of('file-1'), 'key_a')
  await store.release('file-1')
  t.equal(await migrateFileQuota(admin, prefix, createLogger('silent')), 0, 'nothing to carry over')
  t.strictSame(await store.usage('key_a'), { files: 0, bytes: 0 })
  t.strictSame(await keysUnder(admin, prefix), [], 'and nothing left anywhere')
})
