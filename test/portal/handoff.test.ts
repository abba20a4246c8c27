// The hand-off of a made secret from a form's POST to the page its redirect opens: sealed
// with the session's cookie value (the store alone cannot read it), bound to the session
// and the key, taken once, gone after HANDOFF_SECONDS.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { HANDOFF_SECONDS, secretHandoffs } from '../../src/portal/handoff.ts'
import { embeddedPortalSessions } from '../../src/store/portal-sessions.ts'

function setup() {
  const store = embeddedPortalSessions(':memory:')
  const kept = new Map<string, string>()
  // The store as seen from outside: what it was given, to look for the secret in it.
  const spy = {
    putOnce: async (id: string, value: string, until: Date) => {
      kept.set(id, value)
      await store.putOnce(id, value, until)
    },
    takeOnce: (id: string) => store.takeOnce(id),
  }
  return { store, kept, handoffs: secretHandoffs(spy) }
}

const cookie = (): string => randomBytes(32).toString('base64url')
const SECRET = `tg1_${'s'.repeat(49)}`

t.test('taken once, by the session and for the key it was left for', async (t) => {
  const { store, kept, handoffs } = setup()
  t.teardown(() => store.close())
  const mine = cookie()
  await handoffs.give(mine, 'session-a', 'key_1', { kind: 'created', secret: SECRET })
  const [sealed] = [...kept.values()]
  t.ok(
    sealed !== undefined && !sealed.includes(SECRET) && !sealed.includes('key_1') && !sealed.includes('session-a'),
    'the store holds neither the secret nor the ids in clear',
  )
  t.equal(await handoffs.take(mine, 'session-a', 'key_2'), null, "another key's page: nothing")
  t.equal(await handoffs.take(mine, 'session-b', 'key_1'), null, 'another session: nothing')
  t.same(await handoffs.take(mine, 'session-a', 'key_1'), { kind: 'created', secret: SECRET }, 'its own page gets it')
  t.equal(await handoffs.take(mine, 'session-a', 'key_1'), null, 'once')
})

t.test(
  'another cookie cannot open it (a session id read from the store is not enough); tampering reads as nothing',
  async (t) => {
    const { store, kept, handoffs } = setup()
    t.teardown(() => store.close())
    await handoffs.give(cookie(), 'session-a', 'key_1', { kind: 'rotated', secret: SECRET })
    t.equal(await handoffs.take(cookie(), 'session-a', 'key_1'), null, 'a wrong cookie value')
    const mine = cookie()
    await handoffs.give(mine, 'session-a', 'key_1', { kind: 'rotated', secret: SECRET })
    const [id, sealed] = [...kept.entries()].at(-1) ?? ['', '']
    // The second-to-last character of the body carries whole bits (the last may be padding).
    const flipped = sealed.slice(0, -2) + (sealed.at(-2) === 'A' ? 'B' : 'A') + sealed.slice(-1)
    await store.putOnce(id, flipped, new Date(Date.now() + 60_000))
    t.equal(await handoffs.take(mine, 'session-a', 'key_1'), null, 'a changed byte')
  },
)

t.test('gone after HANDOFF_SECONDS', async (t) => {
  const store = embeddedPortalSessions(':memory:')
  t.teardown(() => store.close())
  // The embedded store ends a value by the wall clock: this one was left long ago.
  const past = secretHandoffs(store, () => Date.now() - HANDOFF_SECONDS * 1000 - 1)
  const mine = cookie()
  await past.give(mine, 'session-a', 'key_1', { kind: 'created', secret: SECRET })
  t.equal(await past.take(mine, 'session-a', 'key_1'), null, 'expired')
  const now = secretHandoffs(store)
  await now.give(mine, 'session-a', 'key_1', { kind: 'created', secret: SECRET })
  t.ok(await now.take(mine, 'session-a', 'key_1'), 'within its time: there')
})
