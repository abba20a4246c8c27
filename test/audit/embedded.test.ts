// The embedded audit store (audit.db) against the contract, on disk.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openEmbeddedAuditStore } from '../../src/audit/embedded-store.ts'
import { auditContract } from './contract.ts'

auditContract(t, 'embedded', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-'))
  return {
    open: async () => openEmbeddedAuditStore(dir),
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  }
})
