// The stateful capabilities of the gateway, as ports. Each has a Redis adapter (shared by
// any number of instances) and an embedded adapter (one instance, kept on disk), and both
// pass the same contract tests in test/store/.
import type { KeyRecord, KeyStatus } from '../keys/record.ts'

export interface KeyFilter {
  readonly owner?: string
  readonly tier?: string
  readonly status?: KeyStatus
}

/** What KeyStore.replace did. */
export type ReplaceOutcome = 'replaced' | 'missing' | 'stale'

export interface KeyStore {
  /** Adds a new record; fails if the id or a hash is already taken. */
  insert(record: KeyRecord): Promise<void>
  /**
   * Compare-and-set: replaces the stored record with `record` (same id) and re-indexes its
   * hashes, but only if the stored record is still exactly `expected` (every field equal;
   * pass the copy you read and derived `record` from). Atomic against any other writer, on
   * any instance. Answers 'replaced'; 'missing' if there is no record with that id; 'stale'
   * if the stored record is no longer `expected`, and then nothing was written: read again,
   * re-apply the change and retry (or give up). Throws StoreConflictError if a hash of
   * `record` belongs to another key, RangeError if `expected` has another id.
   */
  replace(record: KeyRecord, expected: KeyRecord): Promise<ReplaceOutcome>
  get(id: string): Promise<KeyRecord | null>
  /** Finds the key whose current or previous hash this is. */
  findByHash(hash: string): Promise<KeyRecord | null>
  list(filter?: KeyFilter): Promise<KeyRecord[]>
}

export type OwnedKind = 'file' | 'fine_tuning.job'

/** Who owns each file and fine-tuning job, whichever backend holds the object itself. */
export interface OwnershipStore {
  claim(kind: OwnedKind, id: string, owner: string): Promise<void>
  ownerOf(kind: OwnedKind, id: string): Promise<string | null>
  /** Ids owned, oldest first. */
  list(kind: OwnedKind, owner: string): Promise<string[]>
  release(kind: OwnedKind, id: string): Promise<void>
}

/** One metered call (or a batch of calls folded together). */
export interface UsageRecord {
  readonly keyId: string
  readonly owner: string
  readonly tier: string
  readonly model: string
  /** UTC day, YYYY-MM-DD. */
  readonly day: string
  readonly requests: number
  readonly inputTokens: number
  readonly outputTokens: number
  /** Cost in the plan's currency units. */
  readonly cost: number
}

export interface UsageQuery {
  readonly keyId?: string
  /** Inclusive YYYY-MM-DD bounds. */
  readonly from?: string
  readonly to?: string
}

export interface UsageStore {
  /** Adds the counters of each record to its (key, model, day) row, atomically per row. */
  add(records: readonly UsageRecord[]): Promise<void>
  /** Rows matching the query, one per (key, model, day). */
  query(query: UsageQuery): Promise<UsageRecord[]>
}

export interface Stores {
  readonly kind: 'redis' | 'embedded'
  readonly keys: KeyStore
  readonly ownership: OwnershipStore
  readonly usage: UsageStore
  /** True when the store answers now. */
  ping(): Promise<boolean>
  close(): Promise<void>
}
