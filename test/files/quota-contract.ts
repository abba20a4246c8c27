// The behaviour every FileQuotaStore adapter must show; run by quota-embedded.test.ts and
// quota-redis.test.ts.
import type { Test } from 'tap'
import type { FileQuotaStore } from '../../src/files/quota-port.ts'

export interface QuotaSpace {
  /** A store whose clock is `now()`. */
  open(now: () => number): Promise<FileQuotaStore>
  cleanup(): Promise<void>
}

export function fileQuotaContract(t: Test, name: string, makeSpace: () => Promise<QuotaSpace>): void {
  const withStore = (
    title: string,
    body: (t: Test, store: FileQuotaStore, clock: { at: number }) => Promise<void>,
  ): void => {
    t.test(`${name}: ${title}`, async (t) => {
      const space = await makeSpace()
      const clock = { at: 1_700_000_000_000 }
      const store = await space.open(() => clock.at)
      t.teardown(async () => {
        await store.close()
        await space.cleanup()
      })
      await body(t, store, clock)
    })
  }
  const caps = { files: 3, bytes: 1000 }

  withStore(
    'uploads hold room under the count cap, atomically; a committed file keeps it, a delete frees it',
    async (t, store) => {
      const tries = await Promise.all(
        Array.from({ length: 10 }, (_, i) => store.hold('key_a', `h${i}`, 10, caps, 60_000)),
      )
      t.equal(tries.filter((o) => o.held).length, 3, 'concurrent uploads stop exactly at the cap')
      const refused = tries.find((o) => !o.held)
      t.same(refused, { held: false, usage: { files: 3, bytes: 30 } })
      t.same(await store.usage('key_b'), { files: 0, bytes: 0 }, 'another key is untouched')
      t.ok((await store.hold('key_b', 'hb', 10, caps, 60_000)).held)

      const held = tries.map((o, i) => (o.held ? `h${i}` : null)).filter((h): h is string => h !== null)
      await store.commit('key_a', held[0] ?? '', 'file-1', 12)
      await store.commit('key_a', held[1] ?? '', 'file-2', 8)
      await store.cancel('key_a', held[2] ?? '')
      t.same(
        await store.usage('key_a'),
        { files: 2, bytes: 20 },
        'the committed files count at their real size; a cancelled hold is gone',
      )
      await store.commit('key_a', 'replayed', 'file-1', 12)
      t.same(await store.usage('key_a'), { files: 2, bytes: 20 }, 'a file is counted once')
      t.ok((await store.hold('key_a', 'h-next', 10, caps, 60_000)).held)
      t.notOk((await store.hold('key_a', 'h-over', 10, caps, 60_000)).held)
      await store.release('file-1')
      await store.release('file-1')
      await store.release('file-unknown')
      t.same(await store.usage('key_a'), { files: 2, bytes: 18 }, 'a delete frees its share once')
    },
  )

  withStore('the byte cap counts files and holds; a hold of a gateway that died lapses', async (t, store, clock) => {
    t.ok((await store.hold('key_a', 'big', 900, caps, 60_000)).held)
    t.same(await store.hold('key_a', 'more', 200, caps, 60_000), { held: false, usage: { files: 1, bytes: 900 } })
    t.ok((await store.hold('key_a', 'small', 100, caps, 60_000)).held, 'up to the cap exactly')
    clock.at += 60_001
    t.same(await store.usage('key_a'), { files: 0, bytes: 0 }, 'holds past their time are gone')
    t.ok((await store.hold('key_a', 'again', 1000, caps, 60_000)).held)
  })
}
