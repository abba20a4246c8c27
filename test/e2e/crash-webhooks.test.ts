// Events survive a crash: a gateway process is killed with SIGKILL after the admin API
// answered (so each event is committed to the outbox) and while its deliveries are in
// flight (the receiver reads them and never answers). A gateway started again on the same
// store delivers every event, each signed, none lost; on the embedded store (webhooks.db)
// and on Redis (its keys, BullMQ recovering the jobs the dead gateway held).
import t, { type Test } from 'tap'

t.setTimeout(600_000)
import { onSharedRedis, startTollgate, type StartOptions } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'
import { startWebhookReceiver } from '../helpers/webhook-receiver.ts'
import { webhookTestConfig } from '../webhooks/harness.ts'

const EVENTS = 20
/** Starting a gateway process takes 2 s on a quiet machine, over 20 s on a loaded one. */
const START_MS = 90_000

async function crashTest(t: Test, options: StartOptions): Promise<void> {
  const config = (doc: Record<string, unknown>): void => {
    options.config?.(doc)
    webhookTestConfig(doc)
    // A delivery in flight at the kill waits on the receiver, not on a timeout.
    Object.assign(doc.webhooks as Record<string, unknown>, { timeoutMs: 120_000 })
    // A job the dead gateway held is run again by another worker within about 3 s.
    doc.queue = { ...((doc.queue ?? {}) as Record<string, unknown>), recoverAfterMs: 2000 }
  }
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  receiver.mode = { kind: 'hang' }
  const first = await startTollgate({ ...options, config, startTimeoutMs: START_MS })
  const admin = async (gwUrl: string, token: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${gwUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    return { status: res.status, json: (await res.json()) as Record<string, unknown> }
  }
  const endpoint = await admin(first.url, first.adminToken, 'POST', '/admin/webhooks', {
    url: receiver.url,
    events: ['key.created'],
  })
  t.equal(endpoint.status, 201)
  receiver.secret = String(endpoint.json.secret)
  const ids: string[] = []
  for (let i = 0; i < EVENTS; i++) {
    const key = await admin(first.url, first.adminToken, 'POST', '/admin/keys', { owner: `crash-${i}` })
    t.equal(key.status, 201)
    ids.push(String(key.json.id))
  }
  const inFlight = await pollUntil(
    async () => receiver.received.length,
    (n) => n >= 1,
    1000,
    10,
  )
  t.ok(inFlight.met, `deliveries were in flight at the kill (${inFlight.value} read, none answered)`)
  first.child.kill('SIGKILL')
  t.equal(await new Promise((done) => first.child.once('exit', (_c, s) => done(s))), 'SIGKILL', 'killed')
  t.equal(receiver.accepted().size, 0, 'nothing was delivered before the kill')

  receiver.mode = { kind: 'ok' }
  const second = await startTollgate({
    ...options,
    config,
    dataDir: first.dataDir,
    adminToken: first.adminToken,
    startTimeoutMs: START_MS,
  })
  t.teardown(() => second.stop())
  const all = await pollUntil(
    async () => receiver.accepted(),
    (accepted) => accepted.size >= EVENTS,
    1500,
    20,
  )
  t.ok(all.met, `every event delivered after the restart (${all.value.size} of ${EVENTS})`)
  const keyIds = [...all.value.values()].map((copies) => String(copies[0]?.data.key_id))
  t.same(keyIds.sort(), [...ids].sort(), 'one key.created per key made before the kill')
  t.ok(
    receiver.received.every((r) => r.verified),
    'every delivery (before and after the kill) verifies',
  )
}

t.test('embedded store: kill -9 between commit and delivery loses no event', async (t) => {
  await crashTest(t, {})
})

t.test('Redis: kill -9 between commit and delivery loses no event', async (t) => {
  await crashTest(t, onSharedRedis(testNamespace(t, 'crash-wh', 'tgtest-crash-wh').namespace))
})
