// The one pub/sub subscription of the feeds between instances (key changes, revocations,
// queue signals), on the shared Redis: live once SUBSCRIBE is answered, messages of its own
// channels handed over, live again after its connection is killed, and closed for good.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { subscribe } from '../../src/store/redis-subscription.ts'
import { pollUntil } from '../helpers/poll.ts'
import { REDIS_URL } from '../helpers/redis.ts'

const base = `tgtest:sub:${randomBytes(6).toString('hex')}:`
/** Waits (bounded) until check() holds. */
const until = async (check: () => boolean): Promise<void> => {
  const polled = await pollUntil(
    async () => check(),
    (ok) => ok,
    500,
  )
  if (!polled.met) throw new Error('the condition never held')
}
const publisher = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-sub-pub' })
t.teardown(() => publisher.disconnect())

t.test('a subscription: live, its messages, again after a reconnect, then closed', async (t) => {
  const name = `tgtest-sub-${randomBytes(4).toString('hex')}`
  const [one, two] = [`${base}one`, `${base}two`]
  const got: Array<[string, string]> = []
  const changes: boolean[] = []
  const feed = subscribe({
    redis: { kind: 'standalone', url: REDIS_URL },
    commandTimeoutMs: 2000,
    name,
    channels: [one, two],
    onMessage: (channel, message) => got.push([channel, message]),
    onLive: (live) => changes.push(live),
  })
  t.teardown(() => feed.close())
  t.equal(await feed.ready(5000), true, 'live once SUBSCRIBE is answered')
  t.equal(feed.live, true)

  await publisher.publish(one, 'a')
  await publisher.publish(`${base}other`, 'not ours')
  await publisher.publish(two, 'b')
  await until(() => got.length >= 2)
  t.same(
    got,
    [
      [one, 'a'],
      [two, 'b'],
    ],
    'the messages of its channels, in order',
  )

  // Its connection killed: lost, then subscribed again by itself.
  const clients = String(await publisher.call('CLIENT', 'LIST'))
  const id = clients
    .split('\n')
    .find((line) => line.includes(` name=${name} `))
    ?.match(/^id=(\d+)/)?.[1]
  t.ok(id, 'the connection carries its name')
  await publisher.call('CLIENT', 'KILL', 'ID', id ?? '0')
  await until(() => changes.length >= 3)
  t.same(changes, [true, false, true], 'lost, then live again')
  await publisher.publish(one, 'c')
  await until(() => got.length >= 3)
  t.same(got.at(-1), [one, 'c'], 'messages arrive again')

  await feed.close()
  t.equal(feed.live, false)
  t.equal(await feed.ready(50), false, 'closed: never live again')
})
