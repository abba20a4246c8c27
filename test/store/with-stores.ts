// The frame of every case of the Stores contract (contract.ts and auth-contract.ts): a case
// gets stores opened for it alone, closed when it ends, and is named after the adapter.
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
