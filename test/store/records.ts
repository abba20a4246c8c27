// Test factories for store records: unique ids and hashes on every call, overridable.
import { randomBytes } from 'node:crypto'
import type { KeyRecord } from '../../src/keys/record.ts'
import type { UsageWrite } from '../../src/store/ports.ts'

const hex = (bytes: number): string => randomBytes(bytes).toString('hex')

/** A fully populated record (arrays, limits, no nulls where a value is possible). */
export function makeKeyRecord(overrides: Partial<KeyRecord> = {}): KeyRecord {
  const secretPrefix = `tg-${hex(3)}`
  return {
    id: `key_${hex(8)}`,
    hash: hex(32),
    previousHash: null,
    previousHashValidUntil: null,
    prefix: secretPrefix,
    name: 'ci pipeline',
    owner: 'team-a',
    tier: 'Standard1000',
    models: ['Mistral-Small-24B-Instruct-2501', 'bge-m3'],
    endpoints: ['chat.completions', 'embeddings'],
    limits: { '*': { rpm: 60, tpm: 100_000 }, 'bge-m3': { input_tpm: 5000, input_price: 0.02, output_price: 0 } },
    status: 'active',
    createdAt: '2025-03-01T10:00:00.000Z',
    updatedAt: '2025-03-01T10:00:00.000Z',
    expiresAt: '2026-03-01T00:00:00.000Z',
    revokedAt: null,
    ...overrides,
  }
}

/** A record with every nullable field null. */
export function makeBareKeyRecord(overrides: Partial<KeyRecord> = {}): KeyRecord {
  return makeKeyRecord({
    name: null,
    owner: null,
    tier: null,
    models: null,
    endpoints: null,
    limits: null,
    expiresAt: null,
    revokedAt: null,
    previousHash: null,
    previousHashValidUntil: null,
    ...overrides,
  })
}

export function makeUsage(overrides: Partial<UsageWrite> = {}): UsageWrite {
  return {
    keyId: 'key_a',
    owner: 'team-a',
    tier: 'Basic',
    model: 'Mistral-Small-24B-Instruct-2501',
    day: '2025-03-01',
    requests: 1,
    inputTokens: 100,
    outputTokens: 20,
    costNanos: 100_000_000,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    cacheReadCostNanos: 0,
    cacheWriteCostNanos: 0,
    cachedRequests: 0,
    batchRequests: 0,
    batchCostNanos: 0,
    ...overrides,
  }
}
