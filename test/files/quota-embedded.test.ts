// The file quota contract on the embedded store (SQLite in a temporary directory).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedFileQuotaStore } from '../../src/files/embedded-quota-store.ts'
import { fileQuotaContract } from './quota-contract.ts'

fileQuotaContract(t, 'embedded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-fq-'))
  return {
    open: async (now) => openEmbeddedFileQuotaStore(dir, now),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
})
