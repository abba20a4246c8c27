// The portal's session store: one contract, on the embedded (SQLite) and the Redis adapter.
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import {
  embeddedPortalSessions,
  redisPortalSessions,
  type PortalSessionRecord,
  type PortalSessionStore,
} from '../../src/store/portal-sessions.ts'
import { closeRedis } from '../../src/store/redis-client.ts'
import { userScopedId } from '../../src/store/user-ids.ts'
import { deleteUnder, keysUnder, redisClient } from '../limits/helpers.ts'

function session(overrides: Partial<PortalSessionRecord> = {}): PortalSessionRecord {
  const now = new Date().toISOString()
  return {
    id: randomBytes(32).toString('hex'),
    userId: 'usr_1',
    username: 'alice',
    csrfToken: randomBytes(32).toString('base64url'),
    createdAt: now,
    lastSeenAt: now,
    expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    ...overrides,
  }
}

async function contract(t: Test, store: PortalSessionStore): Promise<void> {
  const a = session()
  await store.put(a, new Date(Date.now() + 60_000))
  t.same(await store.get(a.id), a, 'read back as stored')
  t.equal(await store.get(session().id), null, 'an unknown id is not found')

  const touched = { ...a, lastSeenAt: new Date(Date.now() + 1000).toISOString() }
  await store.put(touched, new Date(Date.now() + 60_000))
  t.same(await store.get(a.id), touched, 'put overwrites')

  await store.remove(a.id)
  t.equal(await store.get(a.id), null, 'removed')

  const short = session()
  await store.put(short, new Date(Date.now() + 300))
  t.ok(await store.get(short.id), 'there before its end')
  let gone = false
  for (let i = 0; i < 100 && !gone; i++) {
    await new Promise((done) => setTimeout(done, 50))
    gone = (await store.get(short.id)) === null
  }
  t.ok(gone, 'gone after its end')

  // Hand-offs: taken once, whoever asks twice (or at once) gets it only the first time.
  const id = randomBytes(16).toString('hex')
  await store.putOnce(id, 'sealed value', new Date(Date.now() + 60_000))
  const both = await Promise.all([store.takeOnce(id), store.takeOnce(id)])
  t.same(
    both.filter((v) => v !== null),
    ['sealed value'],
    'one of two takes gets it',
  )
  t.equal(await store.takeOnce(id), null, 'and it is gone')
  await store.putOnce(id, 'first', new Date(Date.now() + 60_000))
  await store.putOnce(id, 'second', new Date(Date.now() + 60_000))
  t.equal(await store.takeOnce(id), 'second', 'put overwrites')
  const end = Date.now() + 300
  await store.putOnce(id, 'brief', new Date(end))
  // Wait for the clock to pass its end (not for the store: a take would consume it).
  for (let i = 0; i < 100 && Date.now() <= end + 20; i++) await new Promise((done) => setTimeout(done, 50))
  t.equal(await store.takeOnce(id), null, 'gone after its end')
}

t.test('embedded', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-portal-sessions-'))
  const store = embeddedPortalSessions(dir)
  t.teardown(() => store.close())
  await contract(t, store)
  // Kept on disk: another opening of the same directory finds the session.
  const s = session()
  await store.put(s, new Date(Date.now() + 60_000))
  const again = embeddedPortalSessions(dir)
  t.teardown(() => again.close())
  t.same(await again.get(s.id), s, 'survives a reopen')
})

t.test('redis', async (t) => {
  const redis = redisClient()
  const prefix = `tgtest:portal:${randomBytes(6).toString('hex')}:`
  t.teardown(async () => {
    await deleteUnder(redis, prefix)
    await closeRedis(redis)
  })
  const store = redisPortalSessions(redis, prefix)
  await contract(t, store)
  await deleteUnder(redis, prefix)
  const s = session({ id: userScopedId(randomBytes(32).toString('hex'), 'usr_1') })
  await store.put(s, new Date(Date.now() + 60_000))
  const keys = await keysUnder(redis, prefix)
  t.same(keys, [`${prefix}{o:usr_1}:portal:session:${s.id}`], "one key per session, on its user's slot")
  const ttl = await redis.pttl(keys[0] ?? '')
  t.ok(ttl > 0 && ttl <= 60_000, `expires with the session (${ttl} ms)`)
  await store.putOnce(userScopedId('h', 'usr_1'), 'sealed', new Date(Date.now() + 60_000))
  t.ok((await redis.exists(`${prefix}{o:usr_1}:portal:handoff:h.usr_1`)) === 1, "a hand-off on its session's slot")
  // A session (and hand-off) whose id names no user, made before #25: under {tg} until it ends.
  const old = session()
  await store.put(old, new Date(Date.now() + 60_000))
  t.same(await store.get(old.id), old)
  t.ok((await redis.exists(`${prefix}{tg}:portal:session:${old.id}`)) === 1, 'an old id: in {tg}')
  await store.putOnce('h-old', 'sealed', new Date(Date.now() + 60_000))
  t.equal(await store.takeOnce('h-old'), 'sealed')
})
