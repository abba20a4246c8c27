// The behaviour every Stores adapter must show. Each adapter's runner calls storeContract
// with a function opening fresh, empty stores; every subtest opens its own and closes it.
import type { Test } from 'tap'
import { StoreConflictError } from '../../src/store/errors.ts'
import type { Stores, StreamEntry, StreamRef, UsageRecord } from '../../src/store/ports.ts'
import { makeBareKeyRecord, makeKeyRecord, makeUsage } from './records.ts'
import { storesCases } from './with-stores.ts'

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0)

export function storeContract(t: Test, name: string, open: () => Promise<Stores>): void {
  const withStores = storesCases(t, name, open)

  // --- keys -------------------------------------------------------------------------

  withStores('a record round-trips exactly, nulls, arrays and limits included', async (t, { keys }) => {
    const full = makeKeyRecord({ previousHash: 'ab'.repeat(32), previousHashValidUntil: '2025-03-02T10:00:00.000Z' })
    const bare = makeBareKeyRecord({ name: 'ünïcødé "quoted" \\ key', models: [] })
    await keys.insert(full)
    await keys.insert(bare)
    t.strictSame(await keys.get(full.id), full)
    t.strictSame(await keys.get(bare.id), bare)
    t.strictSame(await keys.findByHash(full.hash), full)
    t.equal(await keys.get('key_missing'), null)
    t.equal(await keys.findByHash('0'.repeat(64)), null)
  })

  withStores('findByHash finds a key by its current and by its previous hash', async (t, { keys }) => {
    const rotated = makeKeyRecord({ previousHash: 'cd'.repeat(32), previousHashValidUntil: '2025-03-02T00:00:00.000Z' })
    const other = makeKeyRecord()
    await keys.insert(rotated)
    await keys.insert(other)
    t.equal((await keys.findByHash(rotated.hash))?.id, rotated.id, 'current hash')
    t.equal((await keys.findByHash('cd'.repeat(32)))?.id, rotated.id, 'previous hash')
    t.equal((await keys.findByHash(other.hash))?.id, other.id, 'another key by its own hash')
  })

  withStores('insert refuses a taken id and leaves the first record as it was', async (t, { keys }) => {
    const first = makeKeyRecord()
    await keys.insert(first)
    const again = makeKeyRecord({ id: first.id, name: 'impostor' })
    await t.rejects(keys.insert(again), StoreConflictError)
    t.strictSame(await keys.get(first.id), first)
    t.equal(await keys.findByHash(again.hash), null, 'the refused record left no hash behind')
  })

  withStores('insert refuses a hash another key holds, current or previous', async (t, { keys }) => {
    const holder = makeKeyRecord({ previousHash: 'ef'.repeat(32) })
    await keys.insert(holder)
    const sameHash = makeKeyRecord({ hash: holder.hash })
    await t.rejects(keys.insert(sameHash), StoreConflictError, 'current hash taken')
    const samePrevious = makeKeyRecord({ previousHash: 'ef'.repeat(32) })
    await t.rejects(keys.insert(samePrevious), StoreConflictError, 'previous hash taken')
    const hashIsOthersPrevious = makeKeyRecord({ hash: 'ef'.repeat(32) })
    await t.rejects(keys.insert(hashIsOthersPrevious), StoreConflictError, "new current hash is another key's previous")
    t.equal(await keys.get(sameHash.id), null)
    t.equal(await keys.get(samePrevious.id), null)
    t.equal(await keys.findByHash(samePrevious.hash), null, 'nothing of a refused insert is indexed')
    t.equal((await keys.findByHash(holder.hash))?.id, holder.id)
    t.equal((await keys.list()).length, 1)
  })

  withStores('of concurrent inserts of one id exactly one succeeds', async (t, { keys }) => {
    const id = 'key_race'
    const contenders = Array.from({ length: 10 }, (_, i) => makeKeyRecord({ id, name: `contender ${i}` }))
    const outcomes = await Promise.allSettled(contenders.map((r) => keys.insert(r)))
    const won = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [i] : []))
    t.equal(won.length, 1, 'one winner')
    t.ok(
      outcomes.every((o) => o.status === 'fulfilled' || o.reason instanceof StoreConflictError),
      'the others are conflicts',
    )
    const winner = contenders[won[0] ?? -1]
    t.strictSame(await keys.get(id), winner)
    const found = await Promise.all(contenders.map((r) => keys.findByHash(r.hash)))
    t.equal(found.filter((r) => r !== null).length, 1, "only the winner's hash is indexed")
  })

  withStores('replace re-indexes: a rotation keeps both hashes, then the old one goes', async (t, { keys }) => {
    const original = makeKeyRecord()
    await keys.insert(original)
    const rotated = {
      ...original,
      hash: '12'.repeat(32),
      previousHash: original.hash,
      previousHashValidUntil: '2025-03-01T11:00:00.000Z',
      updatedAt: '2025-03-01T10:30:00.000Z',
    }
    t.equal(await keys.replace(rotated, original), 'replaced')
    t.strictSame(await keys.get(original.id), rotated)
    t.strictSame(await keys.findByHash('12'.repeat(32)), rotated, 'new hash found')
    t.strictSame(await keys.findByHash(original.hash), rotated, 'old hash still found during the grace')

    const settled = {
      ...rotated,
      previousHash: null,
      previousHashValidUntil: null,
      updatedAt: '2025-03-01T11:00:00.000Z',
    }
    t.equal(await keys.replace(settled, rotated), 'replaced')
    t.equal(await keys.findByHash(original.hash), null, 'old hash no longer found')
    t.strictSame(await keys.findByHash(settled.hash), settled)

    const rekeyed = { ...settled, hash: '34'.repeat(32) }
    t.equal(await keys.replace(rekeyed, settled), 'replaced')
    t.equal(await keys.findByHash(settled.hash), null, 'a dropped current hash is no longer found')
    t.strictSame(await keys.findByHash(rekeyed.hash), rekeyed)
    const reuse = makeKeyRecord({ hash: settled.hash })
    await keys.insert(reuse)
    t.equal((await keys.findByHash(settled.hash))?.id, reuse.id, 'a freed hash can be taken by another key')
  })

  withStores('replace of an unknown id answers missing and creates nothing', async (t, { keys }) => {
    const ghost = makeKeyRecord()
    t.equal(await keys.replace(ghost, ghost), 'missing')
    t.equal(await keys.get(ghost.id), null)
    t.equal(await keys.findByHash(ghost.hash), null)
    t.strictSame(await keys.list(), [])
  })

  withStores('replace refuses a hash another key holds and changes nothing', async (t, { keys }) => {
    const a = makeKeyRecord()
    const b = makeKeyRecord()
    await keys.insert(a)
    await keys.insert(b)
    await t.rejects(keys.replace({ ...a, hash: b.hash }, a), StoreConflictError)
    await t.rejects(keys.replace({ ...a, previousHash: b.hash }, a), StoreConflictError)
    t.strictSame(await keys.get(a.id), a)
    t.equal((await keys.findByHash(a.hash))?.id, a.id)
    t.equal((await keys.findByHash(b.hash))?.id, b.id)
  })

  withStores('replace is a compare-and-set: a stale expected is refused and changes nothing', async (t, { keys }) => {
    const original = makeKeyRecord({
      previousHash: '56'.repeat(32),
      previousHashValidUntil: '2025-03-01T11:00:00.000Z',
    })
    await keys.insert(original)
    // Someone else's write lands first.
    const theirs = {
      ...original,
      status: 'revoked' as const,
      revokedAt: '2025-03-01T10:05:00.000Z',
      previousHash: null,
      previousHashValidUntil: null,
      updatedAt: '2025-03-01T10:05:00.000Z',
    }
    t.equal(await keys.replace(theirs, original), 'replaced')

    // Ours was derived from the record as it was before: refused, whatever it changes.
    const mine = { ...original, name: 'renamed', hash: '78'.repeat(32), updatedAt: '2025-03-01T10:06:00.000Z' }
    t.equal(await keys.replace(mine, original), 'stale')
    t.strictSame(await keys.get(original.id), theirs, 'the stored record is untouched')
    t.equal(await keys.findByHash(mine.hash), null, "the refused record's hash is not indexed")
    t.strictSame(await keys.findByHash(original.hash), theirs, "the stored record's hash still finds it")
    t.equal(await keys.findByHash('56'.repeat(32)), null, 'a hash the stored record dropped stays dropped')
    t.strictSame(await keys.list({ status: 'active' }), [], 'the index by status follows the stored record')

    // Stale by one nested field only: still refused.
    const nearly = { ...theirs, limits: { ...theirs.limits, '*': { rpm: 61, tpm: 100_000 } } }
    t.equal(await keys.replace({ ...theirs, name: 'x' }, nearly), 'stale', 'a difference deep in limits counts')
    t.equal(
      await keys.replace({ ...theirs, name: 'x' }, { ...theirs, models: [...(theirs.models ?? [])].reverse() }),
      'stale',
      'the order of a list counts',
    )
    t.strictSame(await keys.get(original.id), theirs)
  })

  withStores('replace with the current record as expected applies', async (t, { keys }) => {
    const original = makeKeyRecord()
    await keys.insert(original)
    const read = await keys.get(original.id)
    if (read === null) throw new Error('inserted record not found')
    const next = {
      ...read,
      name: 'renamed',
      tier: 'Basic',
      hash: '9c'.repeat(32),
      updatedAt: '2025-03-01T10:07:00.000Z',
    }
    t.equal(await keys.replace(next, read), 'replaced')
    t.strictSame(await keys.get(original.id), next)
    t.strictSame(await keys.findByHash(next.hash), next)
    t.equal(await keys.findByHash(original.hash), null)

    // Compared by value: a copy with its keys in another order is the same record.
    const reordered = Object.fromEntries(
      Object.entries(next)
        .reverse()
        .map(([k, v]) => [k, k === 'limits' && v !== null ? Object.fromEntries(Object.entries(v).reverse()) : v]),
    ) as typeof next
    const again = { ...next, name: 'again' }
    t.equal(await keys.replace(again, reordered), 'replaced', 'field order does not matter')
    t.strictSame(await keys.get(original.id), again)

    await t.rejects(
      keys.replace({ ...again, name: 'other id' }, makeKeyRecord()),
      RangeError,
      'expected must be the same key',
    )
    t.strictSame(await keys.get(original.id), again)
  })

  withStores('of concurrent replaces from the same read exactly one applies', async (t, { keys }) => {
    const original = makeKeyRecord()
    await keys.insert(original)
    const versions = Array.from({ length: 8 }, (_, i) => ({ ...original, hash: `${i}`.repeat(64), name: `v${i}` }))
    const outcomes = await Promise.all(versions.map((v) => keys.replace(v, original)))
    const won = outcomes.flatMap((o, i) => (o === 'replaced' ? [i] : []))
    t.equal(won.length, 1, 'one writer wins')
    t.equal(outcomes.filter((o) => o === 'stale').length, versions.length - 1, 'the others are told they are stale')
    const winner = versions[won[0] ?? -1]
    t.strictSame(await keys.get(original.id), winner)
    const indexed = (await Promise.all(versions.map((v) => keys.findByHash(v.hash)))).filter((r) => r !== null)
    t.strictSame(indexed, [winner], "only the winner's hash is indexed")
  })

  withStores('list filters by owner, tier and status, oldest first', async (t, { keys }) => {
    const at = (n: number): string => `2025-03-0${n}T00:00:00.000Z`
    const a1 = makeKeyRecord({ owner: 'alice', tier: 'Basic', createdAt: at(3) })
    const a2 = makeKeyRecord({
      owner: 'alice',
      tier: 'Standard1000',
      status: 'revoked',
      revokedAt: at(5),
      createdAt: at(1),
    })
    const b1 = makeKeyRecord({ owner: 'bob', tier: 'Basic', createdAt: at(2) })
    const n1 = makeBareKeyRecord({ createdAt: at(4) })
    for (const r of [a1, a2, b1, n1]) await keys.insert(r)
    const ids = async (filter?: Parameters<typeof keys.list>[0]): Promise<string[]> =>
      (await keys.list(filter)).map((r) => r.id)
    t.strictSame(await ids(), [a2.id, b1.id, a1.id, n1.id], 'all, oldest first')
    t.strictSame(await ids({}), [a2.id, b1.id, a1.id, n1.id], 'empty filter')
    t.strictSame(await ids({ owner: 'alice' }), [a2.id, a1.id])
    t.strictSame(await ids({ owner: 'bob' }), [b1.id])
    t.strictSame(await ids({ tier: 'Basic' }), [b1.id, a1.id])
    t.strictSame(await ids({ status: 'revoked' }), [a2.id])
    t.strictSame(await ids({ status: 'active' }), [b1.id, a1.id, n1.id])
    t.strictSame(await ids({ owner: 'alice', status: 'active' }), [a1.id])
    t.strictSame(await ids({ owner: 'alice', tier: 'Basic', status: 'revoked' }), [])
    t.strictSame(await ids({ owner: 'carol' }), [])
    t.strictSame((await keys.list({ owner: 'bob' }))[0], b1, 'listed records are whole')

    t.equal(await keys.replace({ ...b1, status: 'revoked', revokedAt: at(6), owner: 'alice' }, b1), 'replaced')
    t.strictSame(await ids({ status: 'revoked' }), [a2.id, b1.id], 'list follows a replace')
    t.strictSame(await ids({ owner: 'bob' }), [])
    t.strictSame(await ids({ owner: 'alice' }), [a2.id, b1.id, a1.id])
  })

  // --- ownership ----------------------------------------------------------------------

  withStores('ownership: claim, ownerOf, list in claim order, release', async (t, { ownership }) => {
    // Claimed in an order that is neither alphabetical nor reversed.
    for (const id of ['file-c', 'file-a', 'file-b']) await ownership.claim('file', id, 'alice')
    await ownership.claim('file', 'file-z', 'bob')
    await ownership.claim('fine_tuning.job', 'ftjob-1', 'alice')

    t.equal(await ownership.ownerOf('file', 'file-a'), 'alice')
    t.equal(await ownership.ownerOf('file', 'file-z'), 'bob')
    t.equal(await ownership.ownerOf('file', 'file-none'), null)
    t.equal(await ownership.ownerOf('fine_tuning.job', 'file-a'), null, 'kinds are separate')
    t.strictSame(await ownership.list('file', 'alice'), ['file-c', 'file-a', 'file-b'], 'oldest first')
    t.strictSame(await ownership.list('file', 'bob'), ['file-z'], 'owners are isolated')
    t.strictSame(await ownership.list('fine_tuning.job', 'alice'), ['ftjob-1'])
    t.strictSame(await ownership.list('fine_tuning.job', 'bob'), [])
    t.strictSame(await ownership.list('file', 'carol'), [])

    await ownership.claim('file', 'file-c', 'alice')
    t.strictSame(
      await ownership.list('file', 'alice'),
      ['file-c', 'file-a', 'file-b'],
      'a repeated claim by the owner changes nothing',
    )

    await ownership.release('file', 'file-a')
    t.equal(await ownership.ownerOf('file', 'file-a'), null)
    t.strictSame(await ownership.list('file', 'alice'), ['file-c', 'file-b'])
    await ownership.release('file', 'file-a')
    await ownership.release('file', 'never-claimed')
    t.strictSame(await ownership.list('file', 'alice'), ['file-c', 'file-b'], 'releasing the unknown is a no-op')
    t.equal(await ownership.ownerOf('fine_tuning.job', 'ftjob-1'), 'alice', 'release of a file leaves jobs alone')

    await ownership.claim('file', 'file-a', 'bob')
    t.equal(await ownership.ownerOf('file', 'file-a'), 'bob', 'a released id can be claimed again')
    t.strictSame(await ownership.list('file', 'bob'), ['file-z', 'file-a'])
  })

  withStores(
    'ownership: vector stores and file batches are kinds of their own, apart from files',
    async (t, { ownership }) => {
      // A vector store file has the id of its file; the kinds must not see each other's ids.
      await ownership.claim('vector_store', 'vs_1', 'alice')
      await ownership.claim('vector_store.file_batch', 'vsfb_1', 'alice')
      await ownership.claim('file', 'vs_1', 'bob')
      t.equal(await ownership.ownerOf('vector_store', 'vs_1'), 'alice')
      t.equal(await ownership.ownerOf('file', 'vs_1'), 'bob')
      t.equal(await ownership.ownerOf('vector_store', 'vsfb_1'), null)
      t.strictSame(await ownership.list('vector_store.file_batch', 'alice'), ['vsfb_1'])
      await ownership.release('vector_store', 'vs_1')
      t.equal(await ownership.ownerOf('vector_store', 'vs_1'), null)
      t.equal(
        await ownership.ownerOf('vector_store.file_batch', 'vsfb_1'),
        'alice',
        'releasing a store leaves its batch records',
      )
      t.equal(await ownership.ownerOf('file', 'vs_1'), 'bob')
    },
  )

  withStores(
    'ownership: objects of a reply are remembered for their owner until their time runs out',
    async (t, { ownership }) => {
      await ownership.remember('response', ['resp_1'], 'alice', 60_000)
      await ownership.remember('response.item', ['msg_1', 'fc_1'], 'alice', 60_000)
      await ownership.remember('response', [], 'alice', 60_000)
      t.equal(await ownership.ownerOf('response', 'resp_1'), 'alice')
      t.equal(await ownership.ownerOf('response.item', 'fc_1'), 'alice')
      t.equal(await ownership.ownerOf('response', 'msg_1'), null, 'kinds are separate')
      t.equal(await ownership.ownerOf('file', 'resp_1'), null, 'and apart from owned objects')
      await ownership.remember('response', ['resp_1'], 'mallory', 60_000)
      t.equal(await ownership.ownerOf('response', 'resp_1'), 'alice', 'an id remembered keeps its owner')
      await ownership.remember('chat.audio', ['audio_1'], 'alice', 1)
      const deadline = Date.now() + 5000
      let owner = await ownership.ownerOf('chat.audio', 'audio_1')
      while (owner !== null && Date.now() < deadline) {
        await new Promise((done) => setImmediate(done))
        owner = await ownership.ownerOf('chat.audio', 'audio_1')
      }
      t.equal(owner, null, 'forgotten once its time ran out')
    },
  )

  withStores("ownership: a claim on another owner's object is refused", async (t, { ownership }) => {
    await ownership.claim('file', 'file-1', 'alice')
    await t.rejects(ownership.claim('file', 'file-1', 'mallory'), StoreConflictError)
    t.equal(await ownership.ownerOf('file', 'file-1'), 'alice')
    t.strictSame(await ownership.list('file', 'mallory'), [])
    t.strictSame(await ownership.list('file', 'alice'), ['file-1'])
  })

  withStores('ownership: of concurrent claims on one id exactly one owner wins', async (t, { ownership }) => {
    const owners = Array.from({ length: 10 }, (_, i) => `owner-${i}`)
    const outcomes = await Promise.allSettled(owners.map((o) => ownership.claim('fine_tuning.job', 'ftjob-race', o)))
    const winners = owners.filter((_, i) => outcomes[i]?.status === 'fulfilled')
    t.equal(winners.length, 1)
    t.equal(await ownership.ownerOf('fine_tuning.job', 'ftjob-race'), winners[0])
    const lists = await Promise.all(owners.map((o) => ownership.list('fine_tuning.job', o)))
    t.strictSame(lists.flat(), ['ftjob-race'], 'listed under the winner only')
  })

  // --- usage --------------------------------------------------------------------------

  withStores('usage: adds to one row sum, other rows stay apart', async (t, { usage }) => {
    await usage.add([makeUsage({ requests: 1, inputTokens: 100, outputTokens: 20, costNanos: 100_000_000 })])
    await usage.add([makeUsage({ requests: 2, inputTokens: 50, outputTokens: 5, costNanos: 200_000_000 })])
    await usage.add([makeUsage({ model: 'bge-m3', inputTokens: 7, outputTokens: 0, costNanos: 3_000_000 })])
    await usage.add([makeUsage({ keyId: 'key_b', owner: 'team-b' })])
    await usage.add([])
    const rows = await usage.query({ keyId: 'key_a' })
    t.equal(rows.length, 2)
    const chat = rows.find((r) => r.model === 'Mistral-Small-24B-Instruct-2501')
    t.match(chat, {
      keyId: 'key_a',
      owner: 'team-a',
      tier: 'Basic',
      day: '2025-03-01',
      requests: 3,
      inputTokens: 150,
      outputTokens: 25,
    })
    t.equal(chat?.costNanos, 300_000_000, 'cost sums exactly, in nano-units')
    const embed = rows.find((r) => r.model === 'bge-m3')
    t.match(embed, { requests: 1, inputTokens: 7, outputTokens: 0 })
    t.equal(embed?.costNanos, 3_000_000)
    t.strictSame(
      (await usage.query({ keyId: 'key_b' })).map((r) => [r.keyId, r.owner, r.requests]),
      [['key_b', 'team-b', 1]],
    )
    t.strictSame(await usage.query({ keyId: 'key_none' }), [])
  })

  withStores('usage: a row returns every field, numbers as numbers', async (t, { usage }) => {
    const record = makeUsage({ requests: 4, inputTokens: 1234, outputTokens: 567, costNanos: 42_100_000 })
    await usage.add([record])
    const [row, ...rest] = await usage.query({})
    t.equal(rest.length, 0)
    t.strictSame(row, record)
  })

  withStores(
    "usage: a prompt cache's reads and writes sum apart, and a row without them reads 0",
    async (t, { usage }) => {
      const cached = {
        cacheReadTokens: 60,
        cacheWriteTokens: 30,
        cacheReadCostNanos: 18_000,
        cacheWriteCostNanos: 112_500,
      }
      await usage.add([makeUsage(cached), makeUsage()])
      await usage.add([makeUsage(cached)])
      await usage.add([makeUsage({ keyId: 'key_b' })])
      const [a, b, ...rest] = await usage.query({})
      t.equal(rest.length, 0)
      t.match(a, {
        keyId: 'key_a',
        requests: 3,
        inputTokens: 300,
        cacheReadTokens: 120,
        cacheWriteTokens: 60,
        cacheReadCostNanos: 36_000,
        cacheWriteCostNanos: 225_000,
      })
      t.match(b, {
        keyId: 'key_b',
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        cacheReadCostNanos: 0,
        cacheWriteCostNanos: 0,
      })
      await t.rejects(usage.add([makeUsage({ cacheReadTokens: -1 })]), RangeError, 'a negative cache count is refused')
    },
  )

  withStores('usage: batch lines and their cost sum apart, and a row without them reads 0', async (t, { usage }) => {
    const lines = { batchRequests: 2, batchCostNanos: 61_234_567 }
    await usage.add([makeUsage(lines), makeUsage()])
    await usage.add([makeUsage({ ...lines, batchRequests: 1 })])
    await usage.add([makeUsage({ keyId: 'key_b' })])
    const [a, b, ...rest] = await usage.query({})
    t.equal(rest.length, 0)
    t.match(a, { keyId: 'key_a', requests: 3, batchRequests: 3, batchCostNanos: 122_469_134 })
    t.match(b, { keyId: 'key_b', batchRequests: 0, batchCostNanos: 0 })
    await t.rejects(usage.add([makeUsage({ batchCostNanos: 0.5 })]), RangeError, 'a fraction of a nano-unit is refused')
  })

  withStores('usage: 50 concurrent adds to one row sum exactly', async (t, { usage }) => {
    const adds = Array.from({ length: 50 }, (_, i) =>
      usage.add([makeUsage({ requests: 1, inputTokens: i, outputTokens: 2, costNanos: 100_000_001 })]),
    )
    await Promise.all(adds)
    const rows = await usage.query({ keyId: 'key_a' })
    t.equal(rows.length, 1)
    t.equal(rows[0]?.requests, 50)
    t.equal(rows[0]?.inputTokens, sum(Array.from({ length: 50 }, (_, i) => i)))
    t.equal(rows[0]?.outputTokens, 100)
    t.equal(rows[0]?.costNanos, 5_000_000_050, 'cost sums exactly')
  })

  withStores(
    'usage: a once charge (keepIdMs) counts once under its id, in a batch or again later',
    async (t, { usage }) => {
      const once = { id: 'queue:req_1', keepIdMs: 60_000 }
      await usage.add([makeUsage({ ...once, inputTokens: 10, costNanos: 7 })])
      // Run again after a crash: the same charge, maybe with other counts, in a batch with another call's.
      await usage.add([makeUsage({ ...once, inputTokens: 11, costNanos: 8 }), makeUsage({ inputTokens: 5 })])
      await usage.add([makeUsage({ id: 'queue:req_2', keepIdMs: 60_000, inputTokens: 1 })])
      const [row, ...rest] = await usage.query({ keyId: 'key_a' })
      t.strictSame(rest, [])
      t.strictSame([row?.requests, row?.inputTokens], [3, 16], 'the first write of each id, and the plain one')
    },
  )

  withStores('usage: one batch folds records of the same row and of several rows', async (t, { usage }) => {
    await usage.add([
      makeUsage({ costNanos: 250_000_000 }),
      makeUsage({ costNanos: 500_000_000 }),
      makeUsage({ day: '2025-03-02', costNanos: 1 }),
      makeUsage({ keyId: 'key_b', costNanos: 0 }),
    ])
    const rows = await usage.query({})
    t.strictSame(
      rows.map((r) => [r.day, r.keyId, r.requests]),
      [
        ['2025-03-01', 'key_a', 2],
        ['2025-03-01', 'key_b', 1],
        ['2025-03-02', 'key_a', 1],
      ],
      'rows ordered by day, key, model',
    )
    t.equal(rows[0]?.costNanos, 750_000_000)
    t.equal(rows[2]?.costNanos, 1, 'one nano-unit survives')
    t.equal(rows[1]?.costNanos, 0)
  })

  withStores('usage: query by key and inclusive date range', async (t, { usage }) => {
    const days = ['2025-02-27', '2025-02-28', '2025-03-01', '2025-03-02', '2025-03-10']
    await usage.add(days.flatMap((day) => [makeUsage({ day }), makeUsage({ day, keyId: 'key_b' })]))
    const daysOf = (rows: readonly UsageRecord[]): string[] => rows.map((r) => `${r.keyId}@${r.day}`)
    t.strictSame(
      daysOf(await usage.query({ keyId: 'key_a', from: '2025-02-28', to: '2025-03-02' })),
      ['key_a@2025-02-28', 'key_a@2025-03-01', 'key_a@2025-03-02'],
      'both bounds inclusive',
    )
    t.strictSame(
      daysOf(await usage.query({ keyId: 'key_b', from: '2025-03-02' })),
      ['key_b@2025-03-02', 'key_b@2025-03-10'],
      'from only',
    )
    t.strictSame(
      daysOf(await usage.query({ keyId: 'key_a', to: '2025-02-28' })),
      ['key_a@2025-02-27', 'key_a@2025-02-28'],
      'to only',
    )
    t.strictSame(
      daysOf(await usage.query({ from: '2025-03-01', to: '2025-03-01' })),
      ['key_a@2025-03-01', 'key_b@2025-03-01'],
      'one day, every key',
    )
    t.strictSame(daysOf(await usage.query({ from: '2025-03-03', to: '2025-03-09' })), [], 'a gap')
    t.strictSame(daysOf(await usage.query({ from: '2025-03-02', to: '2025-03-01' })), [], 'an inverted range')
    t.equal((await usage.query({})).length, 10, 'no bounds: everything')
  })

  withStores('usage: key and model names with separators do not collide', async (t, { usage }) => {
    await usage.add([
      makeUsage({ keyId: 'a:b', model: 'c', requests: 1 }),
      makeUsage({ keyId: 'a', model: 'b:c', requests: 2 }),
      makeUsage({ keyId: 'a', model: 'org/model:tag %3A', requests: 3 }),
    ])
    t.strictSame(
      (await usage.query({ keyId: 'a:b' })).map((r) => [r.model, r.requests]),
      [['c', 1]],
    )
    t.strictSame(
      (await usage.query({ keyId: 'a' })).map((r) => [r.model, r.requests]),
      [
        ['b:c', 2],
        ['org/model:tag %3A', 3],
      ],
    )
  })

  withStores('usage: owner and tier of a row are those of its latest add', async (t, { usage }) => {
    await usage.add([makeUsage({ tier: 'Basic' })])
    await usage.add([makeUsage({ tier: 'Standard1000', owner: 'team-z' })])
    const rows = await usage.query({})
    t.strictSame(
      rows.map((r) => [r.tier, r.owner, r.requests]),
      [['Standard1000', 'team-z', 2]],
    )
  })

  withStores('usage: a malformed batch is refused whole', async (t, { usage }) => {
    const good = makeUsage()
    await t.rejects(usage.add([good, makeUsage({ day: '2025-3-1' })]), RangeError, 'day format')
    await t.rejects(usage.add([good, makeUsage({ day: '2025-02-30' })]), RangeError, 'not a calendar day')
    await t.rejects(usage.add([good, makeUsage({ inputTokens: 1.5 })]), RangeError, 'fractional tokens')
    await t.rejects(usage.add([good, makeUsage({ requests: -1 })]), RangeError, 'negative requests')
    await t.rejects(usage.add([good, makeUsage({ costNanos: Number.NaN })]), RangeError, 'NaN cost')
    await t.rejects(usage.add([good, makeUsage({ costNanos: 0.5 })]), RangeError, 'a fraction of a nano-unit')
    t.strictSame(await usage.query({}), [], 'nothing of a refused batch was written')
    await t.rejects(usage.query({ from: 'yesterday' }), RangeError, 'a query with a bad bound is refused')
  })

  // --- stream journal ---------------------------------------------------------------

  /** 2025-03-01, midday UTC. */
  const AT = Date.UTC(2025, 2, 1, 12)
  const entry = (overrides: Partial<StreamEntry> = {}): StreamEntry => ({
    id: 'str_1',
    instance: 'gw-a',
    keyId: 'key_a',
    owner: 'team-a',
    tier: 'Basic',
    model: 'Mistral-Small-24B-Instruct-2501',
    at: AT,
    inputTokens: 100,
    outputTokens: 0,
    costNanos: 1000,
    ...overrides,
  })
  /** entry()'s stream, by id and whose. */
  const S1: StreamRef = { id: 'str_1', keyId: 'key_a', owner: 'team-a' }
  const totals = (rows: readonly UsageRecord[]): number[] => [
    sum(rows.map((r) => r.requests)),
    sum(rows.map((r) => r.inputTokens)),
    sum(rows.map((r) => r.outputTokens)),
    sum(rows.map((r) => r.costNanos)),
  ]

  withStores(
    'streams: an open stream is listed, and checkpoints only raise its charge',
    async (t, { streams, usage }) => {
      await streams.open(entry())
      await streams.open(entry({ id: 'str_2', instance: 'gw-b', keyId: 'key_b', at: AT + 1 }))
      await streams.open(entry({ inputTokens: 999 }))
      t.strictSame(
        (await streams.list()).map((e) => [e.id, e.instance, e.inputTokens]),
        [
          ['str_1', 'gw-a', 100],
          ['str_2', 'gw-b', 100],
        ],
        'a second open of one id changes nothing',
      )
      await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 40, costNanos: 5000 }, AT + 10)
      await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 30, costNanos: 4000 }, AT + 20)
      t.strictSame(
        (await streams.list()).find((e) => e.id === 'str_1'),
        entry({ at: AT + 20, outputTokens: 40, costNanos: 5000 }),
        'a late, lower checkpoint lowers nothing',
      )
      await streams.checkpoint({ ...S1, id: 'str_missing' }, { inputTokens: 1, outputTokens: 1, costNanos: 1 }, AT)
      t.equal((await streams.list()).length, 2, 'a checkpoint of an unknown stream opens none')
      t.strictSame(await usage.query({}), [], 'nothing is charged while streams run')
      await t.rejects(
        streams.checkpoint(S1, { inputTokens: 1, outputTokens: -1, costNanos: 0 }, AT),
        RangeError,
        'a negative charge is refused',
      )
    },
  )

  withStores(
    'streams: the write that meters a stream removes its entry; nothing is charged twice',
    async (t, { streams, usage }) => {
      await streams.open(entry())
      await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 40, costNanos: 5000 }, AT + 10)
      await usage.add([{ ...makeUsage({ inputTokens: 100, outputTokens: 60, costNanos: 7000 }), stream: 'str_1' }])
      t.strictSame(await streams.list(), [], 'settled: no longer journalled')
      await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 90, costNanos: 9000 }, AT + 20)
      t.strictSame(await streams.list(), [], 'a checkpoint after the settle does not bring it back')
      t.equal(await streams.recover(S1), null, 'a settled stream cannot be recovered')
      t.strictSame(totals(await usage.query({})), [1, 100, 60, 7000], 'charged once, as settled')
    },
  )

  withStores('streams: a stream is recovered once, however many recover it at once', async (t, { streams, usage }) => {
    await streams.open(entry())
    await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 40, costNanos: 5000 }, AT + 10)
    const outcomes = await Promise.all(Array.from({ length: 8 }, () => streams.recover(S1)))
    const charged = outcomes.filter((r) => r !== null)
    t.equal(charged.length, 1, 'one recovery charges it')
    t.strictSame(
      charged[0],
      makeUsage({ requests: 1, inputTokens: 100, outputTokens: 40, costNanos: 5000 }),
      'its checkpointed charge, on the day of its last write',
    )
    t.strictSame(
      totals(await usage.query({ keyId: 'key_a', from: '2025-03-01', to: '2025-03-01' })),
      [1, 100, 40, 5000],
    )
    t.strictSame(await streams.list(), [], 'recovered: no longer listed')
    t.equal(await streams.recover(S1), null, 'and never recovered again')
    await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 90, costNanos: 9000 }, AT + 20)
    t.equal(await streams.recover(S1), null, 'a checkpoint after the recovery does not reopen it')
  })

  withStores(
    'streams: a settle carries its cache counters; after a recovery they are left out (charged as plain input)',
    async (t, { streams, usage }) => {
      const cached = { cacheReadTokens: 50, cacheWriteTokens: 10, cacheReadCostNanos: 500, cacheWriteCostNanos: 1250 }
      await streams.open(entry())
      await usage.add([
        { ...makeUsage({ inputTokens: 100, outputTokens: 60, costNanos: 7000, ...cached }), stream: 'str_1' },
      ])
      t.match(await usage.query({}), [{ requests: 1, inputTokens: 100, ...cached }])
      await streams.open(entry({ id: 'str_2', keyId: 'key_b' }))
      t.not(await streams.recover({ ...S1, id: 'str_2', keyId: 'key_b' }), null)
      await usage.add([
        {
          ...makeUsage({ keyId: 'key_b', inputTokens: 100, outputTokens: 60, costNanos: 7000, ...cached }),
          stream: 'str_2',
        },
      ])
      t.match(await usage.query({ keyId: 'key_b' }), [
        { requests: 1, cacheReadTokens: 0, cacheWriteTokens: 0, cacheReadCostNanos: 0, cacheWriteCostNanos: 0 },
      ])
    },
  )

  withStores('streams: a settle after a recovery charges only the rest', async (t, { streams, usage }) => {
    await streams.open(entry())
    await streams.checkpoint(S1, { inputTokens: 100, outputTokens: 40, costNanos: 5000 }, AT + 10)
    t.not(await streams.recover(S1), null)
    // Its gateway only looked dead (a Redis blip longer than its heartbeat): it settles after all.
    await usage.add([{ ...makeUsage({ inputTokens: 90, outputTokens: 70, costNanos: 8000 }), stream: 'str_1' }])
    t.strictSame(totals(await usage.query({})), [1, 100, 70, 8000], 'one request; the larger of each count')
    await usage.add([{ ...makeUsage(), stream: 'str_1' }])
    t.strictSame(
      totals(await usage.query({})),
      [2, 200, 90, 100_008_000],
      'a second settle of the id is an ordinary record',
    )
  })

  // --- health ------------------------------------------------------------------------

  withStores('ping answers true while open and false once closed', async (t, stores) => {
    t.equal(await stores.ping(), true)
    t.ok(stores.kind === 'redis' || stores.kind === 'embedded')
    await stores.close()
    t.equal(await stores.ping(), false)
    await stores.close()
    t.pass('close twice is harmless')
  })
}
