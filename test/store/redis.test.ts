// The store contract on Redis, plus what only Redis has: the key layout, several
// instances on one namespace, and a Redis that is down or silent.
//
// Redis at REDIS_URL (default 127.0.0.1:6379) is shared with other suites: everything
// here lives under `tgtest:<random>:` and is deleted at the end. Without Redis these
// tests fail; they never skip.
import { randomBytes } from 'node:crypto'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { Test } from 'tap'
import type { Command, Redis } from 'ioredis'
import { StoreUnavailableError } from '../../src/store/errors.ts'
import type { Stores, UsageRecord } from '../../src/store/ports.ts'
import { createRedisClient, pingRedis, reconnectDelay } from '../../src/store/redis-client.ts'
import {
  createRedisStores,
  JOURNAL_REGISTRY_STALE_MS,
  redisKeys,
  USAGE_WRITE_MEMORY_MS,
} from '../../src/store/redis.ts'
import { identityNamespace, userNamespace } from '../../src/store/redis-kit.ts'
import { userScopedId } from '../../src/store/user-ids.ts'
import { dayNumber } from '../../src/store/usage-rows.ts'
import { storeContract } from './contract.ts'
import { authStoreContract, makeSession } from './auth-contract.ts'
import { makeKeyRecord, makeUsage } from './records.ts'
import { keysUnder, REDIS_URL } from '../helpers/redis.ts'

const NAMESPACE = `tgtest:${randomBytes(6).toString('hex')}:`
const COMMAND_TIMEOUT_MS = 2000

async function deleteUnder(redis: Redis, prefix: string): Promise<void> {
  const keys = await keysUnder(redis, prefix)
  for (let i = 0; i < keys.length; i += 500) await redis.del(...keys.slice(i, i + 500))
}

let instance = 0
/** A fresh namespace inside this run's, for one test. */
const freshPrefix = (): string => `${NAMESPACE}${instance++}:`
const client = (name = 'tgtest'): Redis => createRedisClient(REDIS_URL, { commandTimeoutMs: COMMAND_TIMEOUT_MS, name })

/** One gateway instance's stores on a fresh namespace, closed when the test ends. */
function oneInstance(t: Test): { prefix: string; redis: Redis; stores: Stores } {
  const prefix = freshPrefix()
  const redis = client()
  const stores = createRedisStores(redis, prefix)
  t.teardown(() => stores.close())
  return { prefix, redis, stores }
}

/** Two gateway instances' stores on one fresh namespace (the third element), closed when the test ends. */
function twoInstances(t: Test): [Stores, Stores, string] {
  const prefix = freshPrefix()
  const a = createRedisStores(client('tgtest-a'), prefix)
  const b = createRedisStores(client('tgtest-b'), prefix)
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  return [a, b, prefix]
}

const admin = client('tgtest-admin')
const reachable = await pingRedis(admin)
t.teardown(async () => {
  // Runs even when a test failed halfway; the last test below also checks it.
  try {
    if (reachable) await deleteUnder(admin, NAMESPACE)
  } finally {
    admin.disconnect()
  }
})

if (!reachable) {
  t.fail(`Redis does not answer at ${REDIS_URL}: the Redis store tests need it (set REDIS_URL or start redis-server)`)
} else {
  storeContract(t, 'redis', async () => createRedisStores(client(), freshPrefix()))
  authStoreContract(t, 'redis', async () => createRedisStores(client(), freshPrefix()))
  registerRedisTests()
}

function registerRedisTests(): void {
  t.test("redis: every key written carries the prefix and the {tg} hash tag, or its owner's", async (t) => {
    const { prefix, redis, stores } = oneInstance(t)

    // Record the keys of every command the adapter sends, as Redis itself reads them.
    const sent: string[][] = []
    const send = redis.sendCommand.bind(redis)
    redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
      sent.push([command.name, ...command.args.map(String)])
      return send(command, stream)
    }
    await exerciseEveryOperation(stores)
    redis.sendCommand = send

    const keyless = new Set(['multi', 'exec', 'ping', 'info', 'hello', 'client', 'quit', 'select'])
    const touched = new Set<string>()
    for (const [name, ...args] of sent) {
      if (name === undefined || keyless.has(name.toLowerCase())) continue
      const keys = await admin.call('COMMAND', ['GETKEYS', name, ...args])
      t.ok(Array.isArray(keys) && keys.length > 0, `${name} has keys`)
      for (const key of Array.isArray(keys) ? keys : []) touched.add(String(key))
    }
    const base = `${prefix}{tg}:`
    // Usage rows live with their owner: team-a's, and key:b's (exercised without an owner of its own).
    const owned = [`${prefix}{o:team-a}:`, `${prefix}{k:key%3Ab}:`]
    const placed = (key: string): boolean => key.startsWith(base) || owned.some((o) => key.startsWith(o))
    const stray = [...touched].filter((key) => !placed(key))
    t.strictSame(stray, [], "no command touched a key outside <prefix>{tg}: and the owners' namespaces")
    t.ok(touched.size >= 10, `the check saw the keys (${touched.size})`)

    const stored = await keysUnder(admin, prefix)
    t.ok(stored.length > 0)
    t.strictSame(
      stored.filter((key) => !placed(key)),
      [],
      "every stored key is under <prefix>{tg}: or an owner's namespace",
    )
    for (const o of owned)
      t.ok(
        stored.some((key) => key.startsWith(`${o}usage:`)),
        `a usage row under ${o}`,
      )
    const k = redisKeys(prefix)
    for (const family of [
      k.ids,
      k.ownedSeq,
      k.usageRows,
      `${base}key:`,
      `${base}keyhash:`,
      `${base}own:file:`,
      `${base}owned:file:`,
      `${base}usage:key:`,
    ]) {
      t.ok(
        stored.some((key) => key.startsWith(family)),
        `a ${family.slice(base.length)} key exists`,
      )
    }
  })

  t.test('redis: a prefix that would override the hash tag is refused', async (t) => {
    t.throws(() => createRedisStores(admin, 'bad{prefix}:'), RangeError)
    t.throws(() => redisKeys('bad}'), RangeError)
  })

  t.test('redis: a usage row written with a float cost by an older Tollgate reads as exact nano-units', async (t) => {
    const { prefix, stores } = oneInstance(t)
    const k = redisKeys(prefix)
    const row = k.usageRow('key_old', 'gpt-4o', '2025-03-01')
    await admin.hset(row, {
      keyId: 'key_old',
      model: 'gpt-4o',
      day: '2025-03-01',
      owner: 'o',
      tier: 'Basic',
      requests: 3,
      inputTokens: 1210,
      outputTokens: 0,
      cost: '0.0042713000000000004',
    })
    await admin.zadd(k.usageRowsOfKey('key_old'), 20148, row)
    await stores.usage.add([makeUsage({ keyId: 'key_old', model: 'gpt-4o', owner: 'o', costNanos: 1 })])
    const [read] = await stores.usage.query({ keyId: 'key_old' })
    t.equal(read?.costNanos, 4_271_301, 'the old float, rounded to nano-units, plus the new integer')
  })

  t.test(
    "redis: usage rows of the {tg} layout (older Tollgates, settled streams) add up with their owner's",
    async (t) => {
      const { prefix, stores } = oneInstance(t)
      const k = redisKeys(prefix)
      // As a Tollgate before #25 left them: the row and both indexes in {tg}.
      for (const [day, requests] of [
        ['2025-03-01', 5],
        ['2025-03-02', 2],
      ] as const) {
        const row = k.usageRow('key_a', 'gpt-4o', day)
        await admin.hset(row, {
          keyId: 'key_a',
          model: 'gpt-4o',
          day,
          owner: 'team-old',
          tier: 'Basic',
          requests,
          inputTokens: 10 * requests,
          outputTokens: requests,
          costNanos: 1000 * requests,
        })
        await admin.zadd(k.usageRows, dayNumber(day), row)
        await admin.zadd(k.usageRowsOfKey('key_a'), dayNumber(day), row)
      }
      await stores.usage.add([
        makeUsage({ model: 'gpt-4o', tier: 'Pro', requests: 1, inputTokens: 10, outputTokens: 1, costNanos: 1000 }),
      ])
      const expected = [
        ['2025-03-01', 6, 60, 6, 6000, 'team-a', 'Pro'],
        ['2025-03-02', 2, 20, 2, 2000, 'team-old', 'Basic'],
      ]
      const view = (rows: UsageRecord[]): unknown[] =>
        rows.map((r) => [r.day, r.requests, r.inputTokens, r.outputTokens, r.costNanos, r.owner, r.tier])
      t.strictSame(
        view(await stores.usage.query({ keyId: 'key_a' })),
        expected,
        'by key: one row per day, summed; owner and tier of the latest write',
      )
      t.strictSame(view(await stores.usage.query({})), expected, 'all rows: the same')
      t.ok(
        (await admin.exists(k.ownerUsageRow({ keyId: 'key_a', owner: 'team-a' }, 'gpt-4o', '2025-03-01'))) === 1,
        "the new write went to its owner's row",
      )
    },
  )

  t.test('redis: a row whose indexing failed is indexed by the retry of its write', async (t) => {
    const { redis, stores } = oneInstance(t)
    const write = { ...makeUsage(), id: 'meter9.0' }
    // The first try: the script applies, then the MULTI that indexes the new row fails.
    const multi = redis.multi.bind(redis)
    redis.multi = () => {
      redis.multi = multi
      throw new Error('Connection is closed.')
    }
    await t.rejects(stores.usage.add([write]), StoreUnavailableError)
    t.strictSame(await stores.usage.query({ keyId: 'key_a' }), [], 'written but not yet found')
    await stores.usage.add([write])
    const rows = await stores.usage.query({ keyId: 'key_a' })
    t.equal(rows.length, 1, 'found after the retry')
    t.equal(rows[0]?.requests, 1, 'counted once: the retry carried the same id')
    t.equal((await stores.usage.query({})).length, 1, "in every row's index too")
  })

  t.test('redis: a usage write sent again under its id counts once, on any instance', async (t) => {
    const [a, b, prefix] = twoInstances(t)
    const write = { ...makeUsage({ inputTokens: 7, costNanos: 70 }), id: 'meter1.0' }
    await a.usage.add([write])
    await b.usage.add([write, { ...write, id: 'meter1.1' }])
    await a.usage.add([
      { ...write, id: undefined },
      { ...write, id: undefined },
    ])
    const [row] = await a.usage.query({ keyId: 'key_a' })
    t.equal(row?.requests, 4, 'the id sent twice once, the other id once, the two without an id each')
    t.equal(row?.inputTokens, 28)
    const ttl = await admin.pttl(redisKeys(prefix).ownerUsageWrite({ keyId: 'key_a', owner: 'team-a' }, 'meter1.0'))
    t.ok(ttl > 0 && ttl <= USAGE_WRITE_MEMORY_MS, `the id is remembered for a while, not for ever (${ttl} ms left)`)
  })

  t.test('redis: a command in flight when the connection drops is not run again after the reconnect', async (t) => {
    // A proxy that, once armed, drops the connection instead of passing Redis's next reply
    // on: the command ran, and its caller never heard.
    let armed = false
    const upstreamUrl = new URL(REDIS_URL)
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(upstreamUrl.port || 6379), upstreamUrl.hostname)
      const drop = (): void => {
        client.destroy()
        upstream.destroy()
      }
      client.on('error', drop).on('close', drop)
      upstream.on('error', drop).on('close', drop)
      client.pipe(upstream)
      upstream.on('data', (reply: Buffer) => {
        if (!armed) client.write(reply)
        else {
          armed = false
          drop()
        }
      })
    })
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done))
    const viaProxy = createRedisClient(`redis://127.0.0.1:${(proxy.address() as AddressInfo).port}`, {
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
      name: 'tgtest-lost-reply',
    })
    t.teardown(async () => {
      viaProxy.disconnect()
      await new Promise<void>((done) => proxy.close(() => done()))
    })
    const ready = (): Promise<void> =>
      new Promise((done) => (viaProxy.status === 'ready' ? done() : viaProxy.once('ready', () => done())))
    await ready()
    const counter = `${freshPrefix()}{tg}:counted`
    armed = true
    const outcome = await viaProxy.incr(counter).then(
      () => 'answered',
      (err: Error) => err.message,
    )
    t.not(outcome, 'answered', `the caller is told the command failed (${outcome})`)
    await ready()
    await viaProxy.ping()
    t.equal(await admin.get(counter), '1', 'Redis ran it once: the client did not send it again')
  })

  t.test('redis: two instances on one namespace share and count exactly', async (t) => {
    const [a, b] = twoInstances(t)

    const record = makeKeyRecord()
    await a.keys.insert(record)
    t.strictSame(await b.keys.findByHash(record.hash), record, 'a key made on one instance authenticates on the other')
    const rotated = { ...record, hash: '56'.repeat(32), previousHash: null }
    t.equal(await b.keys.replace(rotated, record), 'replaced')
    t.equal(await a.keys.findByHash(record.hash), null, 'a hash dropped on one instance is gone on the other')

    const adds = Array.from({ length: 60 }, (_, i) =>
      (i % 2 === 0 ? a : b).usage.add([makeUsage({ inputTokens: 10, costNanos: 10_000_000 })]),
    )
    await Promise.all(adds)
    const [row] = await a.usage.query({ keyId: 'key_a' })
    t.equal(row?.requests, 60)
    t.equal(row?.inputTokens, 600)
    t.equal(row?.costNanos, 600_000_000)

    const claims = await Promise.allSettled([
      a.ownership.claim('file', 'file-x', 'alice'),
      b.ownership.claim('file', 'file-x', 'bob'),
    ])
    t.equal(claims.filter((c) => c.status === 'fulfilled').length, 1, 'one instance wins a racing claim')
    const owner = await b.ownership.ownerOf('file', 'file-x')
    t.strictSame(await a.ownership.list('file', owner ?? ''), ['file-x'])
  })

  t.test('redis: a stream left by a gateway that stopped is recovered by one instance of many', async (t) => {
    const [a, b, prefix] = twoInstances(t)
    const at = Date.UTC(2025, 2, 1, 12)
    const streams = Array.from({ length: 20 }, (_, i) => ({
      id: `str_${i}`,
      instance: 'gw-gone',
      keyId: 'key_a',
      owner: 'team-a',
      tier: 'Basic',
      model: 'm',
      at,
      inputTokens: 10,
      outputTokens: i,
      costNanos: 100,
    }))
    for (const entry of streams) await a.streams.open(entry)
    t.equal((await b.streams.list()).length, 20, 'an instance sees the streams another journalled')
    const outcomes = await Promise.all(streams.flatMap((e) => [a.streams.recover(e), b.streams.recover(e)]))
    t.equal(outcomes.filter((r) => r !== null).length, 20, 'each stream charged by exactly one of the two')
    const [row] = await a.usage.query({ keyId: 'key_a' })
    t.match(row, { requests: 20, inputTokens: 200, outputTokens: 190, costNanos: 2000 })
    t.strictSame(await a.streams.list(), [])
    const journal = redisKeys(prefix).journalIn(identityNamespace(prefix, { keyId: 'key_a', owner: 'team-a' }))
    const ttl = await admin.pttl(journal.entry('str_0'))
    t.ok(ttl > 0 && ttl <= 86_400_000, 'a recovered entry lingers a day (for a late settle), then expires')
  })

  t.test("redis: a streamed call's open, checkpoints and settle are one script each on its owner's slot", async (t) => {
    const { prefix, redis, stores } = oneInstance(t)
    const sent = recordCommands(redis)
    const stream = (id: string, owner: string) => journalEntry(id, owner, 10)
    const call = async (id: string, owner: string): Promise<void> => {
      const entry = stream(id, owner)
      await stores.streams.open(entry)
      await stores.streams.checkpoint(entry, { inputTokens: 10, outputTokens: 5, costNanos: 20 }, Date.now())
      await stores.streams.checkpoint(entry, { inputTokens: 10, outputTokens: 9, costNanos: 28 }, Date.now())
      const day = new Date().toISOString().slice(0, 10)
      await stores.usage.add([
        {
          ...makeUsage({ keyId: entry.keyId, owner, day, inputTokens: 10, outputTokens: 9 }),
          stream: id,
          id: `w-${id}`,
        },
      ])
    }
    await call('str_1', 'team-a')
    const first = await touchedBy(sent.splice(0))
    await call('str_2', 'team-a')
    await call('str_3', 'team-b')
    const [second, third] = [await touchedBy(sent.splice(0, 4)), await touchedBy(sent.splice(0))]
    const tg = `${prefix}{tg}:`
    const teamA = identityNamespace(prefix, { keyId: 'key_team-a', owner: 'team-a' })
    const scripts = (calls: Array<[string, string[]]>): string[][] =>
      calls.filter(([name]) => name === 'evalsha' || name === 'eval').map(([, keys]) => keys)
    t.equal(scripts(second).length, 4, 'open, two checkpoints and the settle: four scripts')
    t.ok(
      scripts(second).every((keys) => keys.every((key) => key.startsWith(teamA))),
      "each touches its owner's slot only",
    )
    t.strictSame(
      second.filter(([, keys]) => keys.some((key) => key.startsWith(tg))),
      [],
      'a second stream of the owner, on the same day, touches nothing in {tg}',
    )
    const k = redisKeys(prefix)
    t.strictSame(
      first
        .filter(([, keys]) => keys.some((key) => key.startsWith(tg)))
        .flatMap(([, keys]) => keys)
        .sort(),
      [k.journalGateways, k.journalSlots('gw-a'), k.usageRows, k.usageRowsOfKey('key_team-a')].sort(),
      "the first says once that gw-a journals on the slot, and indexes the day's new row",
    )
    t.ok(
      third.some(([, keys]) => keys.includes(k.journalSlots('gw-a'))),
      'another owner: its slot is said too',
    )
    t.strictSame(await stores.streams.list(), [], 'all settled')
    t.match(await stores.usage.query({ keyId: 'key_team-a' }), [{ requests: 2, inputTokens: 20, outputTokens: 18 }])
  })

  t.test('redis: streams journalled in {tg} by a Tollgate before #25 are listed and recovered there', async (t) => {
    const [a, b, prefix] = twoInstances(t)
    const k = redisKeys(prefix)
    const at = Date.UTC(2025, 2, 1, 12)
    // As such a Tollgate left them: the entry and the index in {tg}.
    for (const [id, instance] of [
      ['str_old', 'gw-old'],
      ['str_running', 'gw-up'],
    ] as const) {
      await admin.hset(k.stream(id), {
        instance,
        keyId: 'key_a',
        owner: 'team-a',
        tier: 'Basic',
        model: 'm',
        at,
        inputTokens: 10,
        outputTokens: 7,
        costNanos: 100,
      })
      await admin.hset(k.streams, id, instance)
    }
    await a.streams.open({
      id: 'str_new',
      instance: 'gw-old',
      keyId: 'key_a',
      owner: 'team-a',
      tier: 'Basic',
      model: 'm',
      at,
      inputTokens: 10,
      outputTokens: 3,
      costNanos: 100,
    })
    const asked: string[] = []
    const stopped = async (instance: string): Promise<boolean> => {
      asked.push(instance)
      return instance === 'gw-old'
    }
    const listed = await b.streams.list(stopped)
    t.strictSame(listed.map((e) => e.id).sort(), ['str_new', 'str_old'], "both layouts: the stopped gateway's only")
    t.strictSame(asked.sort(), ['gw-old', 'gw-up'], 'each gateway asked once')
    for (const entry of listed) t.not(await b.streams.recover(entry), null, `${entry.id} recovered`)
    t.equal(await a.streams.recover(listed[0] ?? { id: '', keyId: '', owner: '' }), null, 'once')
    t.match(await a.usage.query({ keyId: 'key_a' }), [{ day: '2025-03-01', requests: 2, outputTokens: 10 }])
    t.ok((await admin.exists(k.usageRow('key_a', 'm', '2025-03-01'))) === 1, "the old entry's row: in {tg}")
    t.strictSame(
      (await a.streams.list()).map((e) => e.id),
      ['str_running'],
      "the running gateway's old entry stays",
    )
  })

  t.test("redis: a gateway's slots are dropped from its list once stale with none of its streams", async (t) => {
    const [a, b, prefix] = twoInstances(t)
    const k = redisKeys(prefix)
    const entry = (id: string, owner: string) => journalEntry(id, owner, 1)
    const settle = (id: string, owner: string): Promise<void> =>
      a.usage.add([{ ...makeUsage({ keyId: `key_${owner}`, owner }), stream: id }])
    await a.streams.open(entry('str_a', 'team-a'))
    await a.streams.open(entry('str_b', 'team-b'))
    await settle('str_a', 'team-a')
    const slots = async (): Promise<string[]> => (await admin.zrange(k.journalSlots('gw-a'), '0', '-1')).sort()
    const both = [
      identityNamespace(prefix, { keyId: 'key_team-a', owner: 'team-a' }),
      identityNamespace(prefix, { keyId: 'key_team-b', owner: 'team-b' }),
    ]
    t.strictSame(await slots(), both)
    const running = async (): Promise<boolean> => false
    await b.streams.list(running)
    t.strictSame(await slots(), both, 'said lately: kept, even with nothing left')
    // As if said longer ago than the registry keeps a slot with nothing in it.
    const old = Date.now() - JOURNAL_REGISTRY_STALE_MS - 1000
    for (const ns of both) await admin.zadd(k.journalSlots('gw-a'), 'XX', old, ns)
    t.strictSame(await b.streams.list(running), [], "a running gateway's streams are not read")
    t.strictSame(await slots(), [both[1]], 'the stale slot with nothing left goes; the one with a stream stays')
    await settle('str_b', 'team-b')
    await b.streams.list(running)
    t.strictSame(await slots(), [], 'then that one too')
    t.strictSame(await admin.smembers(k.journalGateways), [], 'and the gateway, with its last slot')
  })

  t.test(
    "redis: a user's sessions and refresh tokens on the user's slot; ids naming no user stay in {tg}",
    async (t) => {
      const { prefix, stores } = oneInstance(t)
      const user = 'usr_0123456789abcdef01234567'
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((x) => x.repeat(64)) as [string, string, string, string]
      const session = makeSession({ id: userScopedId('ses_new', user), userId: user })
      await stores.sessions.create(session, userScopedId(a, user))
      const next = { hash: userScopedId(b, user), seed: 'seed' }
      t.match(await stores.sessions.rotateRefresh(userScopedId(a, user), next, new Date(), 0), { outcome: 'rotated' })
      // Made before ids named their user: found, refreshed and revoked where it is.
      const old = makeSession({ id: 'ses_old', userId: user })
      await stores.sessions.create(old, c)
      t.match(await stores.sessions.rotateRefresh(c, { hash: d, seed: 's' }, new Date(), 0), { outcome: 'rotated' })
      t.equal(await stores.sessions.revoke(session.id, new Date()), true)
      t.equal(await stores.sessions.revoke(old.id, new Date()), true)
      t.match(await stores.sessions.get(session.id), { revokedAt: String })
      const mine = userNamespace(prefix, user)
      const tg = `${prefix}{tg}:`
      t.strictSame(
        (await keysUnder(admin, prefix)).sort(),
        [
          `${mine}sess:${encodeURIComponent(session.id)}`,
          `${mine}rt:${a}.${user}`,
          `${mine}rt:${b}.${user}`,
          `${tg}sess:ses_old`,
          `${tg}rt:${c}`,
          `${tg}rt:${d}`,
        ].sort(),
      )
    },
  )

  t.test('redis: replace is a compare-and-set across instances', async (t) => {
    const [a, b] = twoInstances(t)
    const record = makeKeyRecord()
    await a.keys.insert(record)

    const readByA = await a.keys.get(record.id)
    if (readByA === null) throw new Error('inserted record not found')
    const revoked = { ...record, status: 'revoked' as const, revokedAt: '2025-03-01T10:05:00.000Z' }
    t.equal(await b.keys.replace(revoked, record), 'replaced', 'b revokes')
    t.equal(
      await a.keys.replace({ ...readByA, name: 'late edit' }, readByA),
      'stale',
      "a's write from its older read is refused",
    )
    t.strictSame(await b.keys.get(record.id), revoked, 'the revoke stands')
  })

  t.test("redis: a write landing between replace's own read and its script is not overwritten", async (t) => {
    const { prefix, redis, stores } = oneInstance(t)
    const k = redisKeys(prefix)
    const record = makeKeyRecord()
    await stores.keys.insert(record)

    // Just before the adapter's compare-and-set script goes out, another instance writes.
    type Eval = (...args: unknown[]) => Promise<unknown>
    const patched = redis as unknown as { evalsha: Eval }
    const evalsha = patched.evalsha.bind(redis)
    let interpose: (() => Promise<unknown>) | null = null
    let scripts = 0
    patched.evalsha = async (...args) => {
      scripts++
      const other = interpose
      interpose = null
      if (other !== null) await other()
      return evalsha(...args)
    }
    t.teardown(() => {
      patched.evalsha = evalsha
    })

    // 1. The other write changes the record: replace answers stale and writes nothing.
    const revoked = { ...record, status: 'revoked' as const, revokedAt: '2025-03-01T10:05:00.000Z' }
    interpose = () => admin.set(k.record(record.id), JSON.stringify(revoked))
    t.equal(await stores.keys.replace({ ...record, name: 'late edit', hash: 'ab'.repeat(32) }, record), 'stale')
    t.strictSame(await stores.keys.get(record.id), revoked, 'the other write stands')
    t.equal(await admin.get(k.hash('ab'.repeat(32))), null, "the refused record's hash was not indexed")

    // 2. The other write leaves the same record (as other text): replace reads again and applies.
    scripts = 0
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(revoked).reverse()))
    interpose = () => admin.set(k.record(record.id), reordered)
    const next = { ...revoked, name: 'renamed' }
    t.equal(await stores.keys.replace(next, revoked), 'replaced')
    t.equal(scripts, 2, 'the script ran twice: refused once, then applied')
    t.strictSame(await stores.keys.get(record.id), next)
  })

  t.test('redis: concurrent replace and release stay consistent', async (t) => {
    const stores = createRedisStores(client(), freshPrefix())
    t.teardown(() => stores.close())
    const record = makeKeyRecord()
    await stores.keys.insert(record)
    const versions = Array.from({ length: 8 }, (_, i) => ({ hash: `${i}`.repeat(64), name: `v${i}` }))
    // Each writer reads, derives its version and retries on 'stale', as KeyService does.
    const write = async (change: (typeof versions)[number]): Promise<number> => {
      for (let attempt = 1; attempt <= 100; attempt++) {
        const current = await stores.keys.get(record.id)
        if (current === null) throw new Error('record vanished')
        if ((await stores.keys.replace({ ...current, ...change }, current)) === 'replaced') return attempt
      }
      throw new Error('never applied')
    }
    const attempts = await Promise.all(versions.map(write))
    t.ok(
      attempts.some((a) => a > 1),
      `writers that lost a race were told so and retried (${attempts.join(',')})`,
    )
    const final = await stores.keys.get(record.id)
    const indexed = (await Promise.all(versions.map((v) => stores.keys.findByHash(v.hash)))).filter((r) => r !== null)
    t.strictSame(indexed, [final], "only the last version's hash is left indexed")
    t.equal(await stores.keys.findByHash(record.hash), null)

    await stores.ownership.claim('file', 'file-r', 'alice')
    await Promise.all(Array.from({ length: 5 }, () => stores.ownership.release('file', 'file-r')))
    t.equal(await stores.ownership.ownerOf('file', 'file-r'), null)
    t.strictSame(await stores.ownership.list('file', 'alice'), [])
  })

  t.test('redis: a stale hash index entry never finds a key whose record lacks that hash', async (t) => {
    // What findByHash sees if a replace lands between its two reads.
    const { prefix, stores } = oneInstance(t)
    const record = makeKeyRecord()
    await stores.keys.insert(record)
    const stale = 'de'.repeat(32)
    await admin.set(redisKeys(prefix).hash(stale), record.id)
    t.equal(await stores.keys.findByHash(stale), null)
    t.strictSame(await stores.keys.findByHash(record.hash), record)
  })

  t.test('redis: refusals and corrupt values are not reported as an outage', async (t) => {
    const { prefix, stores } = oneInstance(t)
    const k = redisKeys(prefix)
    await admin.set(k.usageRows, 'not a sorted set')
    const wrongType = await settle(stores.usage.query({}))
    t.match(wrongType, { name: 'ReplyError', message: /WRONGTYPE/ }, "Redis's own refusal comes through")
    t.notOk(wrongType instanceof StoreUnavailableError)
    await admin.set(k.record('key_corrupt'), '{"id": "key_corrupt"}')
    const corrupt = await settle(stores.keys.get('key_corrupt'))
    t.type(corrupt, TypeError, 'a malformed record is an error of its own')
    t.notOk(corrupt instanceof StoreUnavailableError)
  })

  t.test('redis: a lazily connected client works from its first call', async (t) => {
    const redis = createRedisClient(REDIS_URL, { commandTimeoutMs: COMMAND_TIMEOUT_MS, lazyConnect: true })
    t.equal(redis.status, 'wait', 'nothing opened at construction')
    const stores = createRedisStores(redis, freshPrefix())
    t.teardown(() => stores.close())
    const before = redis.listenerCount('ready')
    const calls = Promise.all(Array.from({ length: 20 }, (_, i) => stores.ownership.ownerOf('file', `f${i}`)))
    // The twenty wait on the one opening together: one listener, not twenty (Node warns past ten).
    t.equal(redis.listenerCount('ready') - before, 1, "one 'ready' listener for all the waiting calls")
    t.strictSame(
      await calls,
      Array.from({ length: 20 }, () => null),
      '20 concurrent first calls all answered',
    )
    t.equal(redis.listenerCount('ready'), before, 'and none left once ready')
    t.equal(await stores.ping(), true)
  })

  t.test('redis: Redis down (closed port): ping false and calls reject fast', async (t) => {
    for (const lazyConnect of [false, true]) {
      const redis = createRedisClient('redis://127.0.0.1:1', {
        commandTimeoutMs: 200,
        connectTimeoutMs: 200,
        lazyConnect,
      })
      const stores = createRedisStores(redis, freshPrefix())
      t.teardown(() => stores.close())
      await expectUnavailable(t, stores, `closed port${lazyConnect ? ', lazy client' : ''}`)
      const raw = await settle(redis.get('x'))
      t.type(raw, Error, 'a raw command on the client rejects too')
      t.notMatch(raw instanceof Error ? raw.message : '', /timed out/i, 'at once, not queued until its deadline')
    }
  })

  t.test('redis: Redis silent (accepts, never answers): ping false and calls reject in bounded time', async (t) => {
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on('error', () => {})
      socket.on('close', () => sockets.delete(socket))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.teardown(() => {
      for (const socket of sockets) socket.destroy()
      server.close()
    })
    const { port } = server.address() as AddressInfo
    const redis = createRedisClient(`redis://127.0.0.1:${port}`, { commandTimeoutMs: 200, connectTimeoutMs: 200 })
    const stores = createRedisStores(redis, freshPrefix())
    t.teardown(() => stores.close())
    await expectUnavailable(t, stores, 'silent server')
    t.type(await settle(redis.get('x')), Error, 'a raw command on the client rejects too')
  })

  t.test('redis client: the options that keep a dead Redis off the request path', async (t) => {
    const redis = createRedisClient('redis://127.0.0.1:6379/0', {
      commandTimeoutMs: 300,
      name: 'tgtest-opts',
      lazyConnect: true,
    })
    t.teardown(() => redis.disconnect())
    t.match(redis.options, {
      commandTimeout: 300,
      connectTimeout: 1000,
      maxRetriesPerRequest: 1,
      enableOfflineQueue: false,
      lazyConnect: true,
      connectionName: 'tgtest-opts',
      socketTimeout: 600,
    })
    t.type(redis.options.retryStrategy, 'function')
    t.equal(redis.status, 'wait')
  })

  t.test('redis client: reconnect backoff grows and stays under its cap', async (t) => {
    const delays = Array.from({ length: 40 }, (_, i) => reconnectDelay(i + 1, 2000))
    t.ok(
      delays.every((d) => d >= 25 && d <= 2000),
      'within [25, 2000] ms',
    )
    t.ok((delays[0] ?? Infinity) <= 50, 'the first retry is quick')
    t.ok(
      delays.slice(10).every((d) => d >= 1000),
      'later retries back off to at least half the cap',
    )
    t.throws(() => createRedisClient(REDIS_URL, { commandTimeoutMs: 0 }), RangeError)
    t.throws(() => createRedisClient(REDIS_URL, { commandTimeoutMs: 1.5 }), RangeError)
  })

  t.test('redis: the run leaves no key behind', async (t) => {
    await deleteUnder(admin, NAMESPACE)
    t.strictSame(await keysUnder(admin, NAMESPACE), [])
  })
}

/** Runs each kind of operation once, so the key-layout test sees every key family. */
/** The commands `redis` sends from now on, as [name, ...args]. */
/** A journalled stream of gateway gw-a for `owner`'s key, opened with `tokens` input tokens (and their cost in nanos). */
function journalEntry(id: string, owner: string, tokens: number) {
  return {
    id,
    instance: 'gw-a',
    keyId: `key_${owner}`,
    owner,
    tier: 'Basic',
    model: 'm',
    at: Date.now(),
    inputTokens: tokens,
    outputTokens: 0,
    costNanos: tokens,
  }
}

function recordCommands(redis: Redis): string[][] {
  const sent: string[][] = []
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    sent.push([command.name, ...command.args.map(String)])
    return send(command, stream)
  }
  return sent
}

/** Each command with the keys it touches, as Redis itself reads them (keyless ones left out). */
async function touchedBy(sent: readonly string[][]): Promise<Array<[string, string[]]>> {
  const out: Array<[string, string[]]> = []
  for (const [name, ...args] of sent) {
    if (name === undefined || ['multi', 'exec', 'ping', 'info', 'hello', 'client', 'select'].includes(name)) continue
    const keys = await admin.call('COMMAND', ['GETKEYS', name, ...args])
    out.push([name, Array.isArray(keys) ? keys.map(String) : []])
  }
  return out
}

async function exerciseEveryOperation(stores: Stores): Promise<void> {
  const record = makeKeyRecord({ previousHash: '78'.repeat(32) })
  await stores.keys.insert(record)
  await stores.keys.replace({ ...record, previousHash: null, hash: '9a'.repeat(32) }, record)
  await stores.keys.get(record.id)
  await stores.keys.findByHash('9a'.repeat(32))
  await stores.keys.list({ owner: 'team-a' })
  await stores.ownership.claim('file', 'file-1', 'alice')
  await stores.ownership.claim('file', 'file-2', 'alice')
  await stores.ownership.claim('fine_tuning.job', 'ftjob-1', 'alice')
  await stores.ownership.ownerOf('file', 'file-1')
  await stores.ownership.list('file', 'alice')
  await stores.ownership.release('file', 'file-2')
  await stores.usage.add([
    makeUsage(),
    makeUsage({ keyId: 'key:b', owner: 'key:b', model: 'm/x:y', day: '2025-03-02' }),
  ])
  await stores.usage.query({ keyId: 'key_a', from: '2025-03-01', to: '2025-03-31' })
  await stores.usage.query({})
  const stream = { instance: 'gw-a', keyId: 'key_a', owner: 'team-a', tier: 'Basic', model: 'm', at: Date.now() }
  const charge = { inputTokens: 10, outputTokens: 0, costNanos: 10 }
  await stores.streams.open({ id: 'str_1', ...stream, ...charge })
  await stores.streams.open({ id: 'str_2', ...stream, ...charge })
  await stores.streams.checkpoint({ id: 'str_1', keyId: 'key_a', owner: 'team-a' }, charge, Date.now())
  await stores.streams.list()
  await stores.streams.recover({ id: 'str_2', keyId: 'key_a', owner: 'team-a' })
  await stores.usage.add([{ ...makeUsage(), stream: 'str_1', id: 'w1' }])
}

/**
 * 'resolved', the rejection, or 'hung' after a deadline. A guard against hanging, not a
 * speed measurement: the clients under test time out after 200 ms, the deadline is 5 s.
 */
async function settle(p: Promise<unknown>, deadlineMs = 5000): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve('hung'), deadlineMs)
  })
  try {
    return await Promise.race([
      p.then(
        () => 'resolved',
        (error: unknown) => error,
      ),
      hung,
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** Every store call must reject with StoreUnavailableError, and ping answer false. */
async function expectUnavailable(t: Test, stores: Stores, label: string): Promise<void> {
  t.equal(await settle(stores.ping()), 'resolved', `${label}: ping answers`)
  t.equal(await stores.ping(), false, `${label}: ping is false`)
  const calls: [string, () => Promise<unknown>][] = [
    ['keys.insert', () => stores.keys.insert(makeKeyRecord())],
    [
      'keys.replace',
      () => {
        const r = makeKeyRecord()
        return stores.keys.replace(r, r)
      },
    ],
    ['keys.get', () => stores.keys.get('key_x')],
    ['keys.findByHash', () => stores.keys.findByHash('ab')],
    ['keys.list', () => stores.keys.list()],
    ['ownership.claim', () => stores.ownership.claim('file', 'f', 'o')],
    ['ownership.ownerOf', () => stores.ownership.ownerOf('file', 'f')],
    ['ownership.list', () => stores.ownership.list('file', 'o')],
    ['ownership.release', () => stores.ownership.release('file', 'f')],
    ['usage.add', () => stores.usage.add([makeUsage()])],
    ['usage.query', () => stores.usage.query({})],
  ]
  for (const [name, call] of calls) {
    const outcome = await settle(call())
    t.type(outcome, StoreUnavailableError, `${label}: ${name} rejects as unavailable`)
  }
}
