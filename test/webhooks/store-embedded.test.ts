// The webhook store contract on the embedded store (webhooks.db in a temporary directory).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedWebhookStore } from '../../src/webhooks/embedded-store.ts'
import { webhookStoreContract } from './store-contract.ts'

webhookStoreContract(t, 'embedded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-wh-'))
  return {
    open: async () => openEmbeddedWebhookStore(dir),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
})
