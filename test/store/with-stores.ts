// The frame of every case of a store contract (contract.ts and auth-contract.ts for the
// Stores; the audit and webhook stores' contracts through spaceCases): a case gets a store
// opened for it alone, closed when it ends (and its space cleaned up), and is named after
// the adapter.
import type { Test } from 'tap'
import type { Stores } from '../../src/store/ports.ts'

export type StoresCase = (title: string, body: (t: Test, stores: Stores) => Promise<void>) => void

/** Cases titled `<name>: <title>`, each on the stores `open` makes for it. */
export function storesCases(t: Test, name: string, open: () => Promise<Stores>): StoresCase {
  return (title, body) => {
    t.test(`${name}: ${title}`, async (t) => {
      const stores = await open()
      t.teardown(() => stores.close())
      await body(t, stores)
    })
  }
}

/** A place a store contract's cases each open a store of their own in. */
export interface StoreSpace<S extends { close(): Promise<void> }> {
  open(): Promise<S>
  cleanup(): Promise<void>
}

/** Cases titled `<name>: <title>`, each on a store opened in a fresh space, both gone at its end. */
export function spaceCases<S extends { close(): Promise<void> }>(
  t: Test,
  name: string,
  makeSpace: () => Promise<StoreSpace<S>>,
): (title: string, body: (t: Test, store: S) => Promise<void>) => void {
  return (title, body) => {
    t.test(`${name}: ${title}`, async (t) => {
      const space = await makeSpace()
      const store = await space.open()
      t.teardown(async () => {
        await store.close()
        await space.cleanup()
      })
      await body(t, store)
    })
  }
}
