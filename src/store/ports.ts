// The stateful capabilities of the gateway, as ports. Each has a Redis adapter (shared by
// any number of instances) and an embedded adapter (one instance, kept on disk), and both
// pass the same contract tests in test/store/.
import type { KeyRecord, KeyStatus } from '../keys/record.ts'
import type { TurnCommit } from './sqlite.ts'

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

/**
 * Kinds of objects that belong to an owner. Vector store files need no kind of their own:
 * one is reached only through its vector store, and attaching a file needs the file.
 */
export const OWNED_KINDS = ['file', 'fine_tuning.job', 'vector_store', 'vector_store.file_batch'] as const
/**
 * Objects a reply hands out that a later call may name (a stored response, its output items,
 * a chat completion's audio): remembered for their owner for a while, never listed.
 */
export const REMEMBERED_KINDS = ['response', 'response.item', 'chat.audio'] as const
export type RememberedKind = (typeof REMEMBERED_KINDS)[number]
export type OwnedKind = (typeof OWNED_KINDS)[number]

/** Who owns each owned object, whichever backend holds the object itself. */
export interface OwnershipStore {
  claim(kind: OwnedKind, id: string, owner: string): Promise<void>
  ownerOf(kind: OwnedKind | RememberedKind, id: string): Promise<string | null>
  /** Ids owned, oldest first. */
  list(kind: OwnedKind, owner: string): Promise<string[]>
  release(kind: OwnedKind, id: string): Promise<void>
  /**
   * Records objects of a reply as the owner's for `ttlMs` (the upstream keeps them about
   * that long); ownerOf answers for them until then. An id already remembered keeps its owner.
   */
  remember(kind: RememberedKind, ids: readonly string[], owner: string, ttlMs: number): Promise<void>
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
  /** Cost in integer nano-units (10⁻⁹) of the plan's currency: see keys/money.ts. */
  readonly costNanos: number
  /**
   * Of inputTokens, what the upstream read from its prompt cache and what it wrote to it;
   * of costNanos, what those cost (keys/money.ts, callCost). Absent is 0; query() always
   * fills them in.
   */
  readonly cacheReadTokens?: number
  readonly cacheWriteTokens?: number
  readonly cacheReadCostNanos?: number
  readonly cacheWriteCostNanos?: number
  /** Of requests, those the gateway's response cache answered (src/cache/): no upstream call. Absent is 0. */
  readonly cachedRequests?: number
  /** Of requests, the lines of batches (src/batches/); of costNanos, what they cost (at the tier's batch price). Absent is 0. */
  readonly batchRequests?: number
  readonly batchCostNanos?: number
}

/** The counters of a usage row, in the order the stores write them. */
export const CACHE_COUNTERS = [
  'cacheReadTokens',
  'cacheWriteTokens',
  'cacheReadCostNanos',
  'cacheWriteCostNanos',
  'cachedRequests',
] as const

/** A usage row's counters besides its four totals, in the order the stores write them: the cache's, then batches'. */
export const ROW_COUNTERS = [...CACHE_COUNTERS, 'batchRequests', 'batchCostNanos'] as const
export type RowCounter = (typeof ROW_COUNTERS)[number]

export interface UsageQuery {
  readonly keyId?: string
  /** Inclusive YYYY-MM-DD bounds. */
  readonly from?: string
  readonly to?: string
}

/** A usage record as written: it may settle a journalled stream (see StreamJournal). */
export interface UsageWrite extends UsageRecord {
  /**
   * The journalled stream this record settles. In the same atomic write the stream's entry
   * is removed, and what recovery already charged for it (the entry was recovered while its
   * gateway only looked dead) is taken off this record, so the call is charged once.
   */
  readonly stream?: string
  /**
   * The write's id. A store that can lose a reply after applying a write (Redis) applies a
   * given id once, within USAGE_WRITE_MEMORY_MS: a write sent again because its first
   * reply never came counts once. The embedded store's writes commit or throw, and ignore it
   * unless `keepIdMs` says otherwise.
   */
  readonly id?: string
  /**
   * With `id`: a charge that must count once across restarts too (a stored request's:
   * limits/port.ts OnceCharge). Both stores apply its id once within this long of the
   * first write (Redis at least USAGE_WRITE_MEMORY_MS; embedded in its applied-writes table).
   */
  readonly keepIdMs?: number
}

export interface UsageStore {
  /**
   * Adds the counters of each record to its (key, model, day) row, atomically per row;
   * a record that settles a stream removes its journal entry in the same write.
   */
  add(records: readonly UsageWrite[]): Promise<void>
  /** Rows matching the query, one per (key, model, day). */
  query(query: UsageQuery): Promise<UsageRecord[]>
}

/** What a running stream would be charged now: its prompt and the output delivered so far. */
export interface StreamCharge {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly costNanos: number
}

/** A running stream as journalled. */
export interface StreamEntry extends StreamCharge {
  /** Random, unique per stream. */
  readonly id: string
  /** The gateway running it: its queue heartbeat tells whether it still runs. */
  readonly instance: string
  readonly keyId: string
  readonly owner: string
  readonly tier: string
  readonly model: string
  /** Epoch ms of the latest write (open or checkpoint): the usage row's day if it is recovered. */
  readonly at: number
}

/**
 * Streams in flight, kept where their gateway's death cannot take them: a gateway killed
 * mid-stream (kill -9, OOM, a lost node) never settles its streams, and without this the
 * tokens their clients already received would never be charged. A stream is opened when
 * it starts, checkpointed as it flows, and its entry goes in the very write that meters
 * it (UsageWrite.stream). Entries left by a gateway that stopped are recovered: charged
 * once, by one instance.
 */
export interface StreamJournal {
  /** Journals a stream that starts. */
  open(entry: StreamEntry): Promise<void>
  /** Raises a stream's charge to `charge`; nothing if it is settled or recovered already. */
  checkpoint(stream: StreamRef, charge: StreamCharge, at: number): Promise<void>
  /**
   * The streams journalled and neither settled nor recovered; with `of`, only those of the
   * instances it accepts (asked once per instance), so that a store which keeps its index
   * by instance (Redis) reads no running gateway's streams.
   */
  list(of?: (instance: string) => Promise<boolean>): Promise<StreamEntry[]>
  /**
   * Charges a journalled stream as one request of its charge, on the day of its latest
   * write, and marks it recovered (its settle, should its gateway be alive after all,
   * then charges only the rest). Atomic: of any number of callers on any instance, one
   * gets the record charged; the others (and any call after a settle) get null.
   */
  recover(stream: StreamRef): Promise<UsageRecord | null>
}

/**
 * A stream by its id and whose it is: a store may keep a stream with the rest of its
 * owner's state (Redis: on its owner's slot), and finds it there without a lookup.
 */
export type StreamRef = Pick<StreamEntry, 'id' | 'keyId' | 'owner'>

// --- RAG gateway accounts, sessions and signing keys (src/accounts, src/tokens) ---------

/** A RAG gateway user. The password is only ever here as its scrypt hash (accounts/password.ts). */
export interface AccountRecord {
  /** Stable and never reused (`usr_…`): a token's `sub`. A user deleted and made again gets a new one. */
  readonly id: string
  readonly username: string
  readonly passwordHash: string
  readonly roles: readonly string[]
  readonly groups: readonly string[]
  readonly tenant: string
  readonly disabled: boolean
  /** Sessions started before this ISO time are void (set when the password changes). */
  readonly sessionsValidFrom: string
  readonly createdAt: string
  readonly updatedAt: string
}

export interface AccountStore {
  /** Adds a new account; StoreConflictError if the username is taken. */
  insert(account: AccountRecord): Promise<void>
  get(username: string): Promise<AccountRecord | null>
  /** Every account, by username. */
  list(): Promise<AccountRecord[]>
  /** Compare-and-set, as KeyStore.replace: only if the stored account is still exactly `expected`. */
  replace(account: AccountRecord, expected: AccountRecord): Promise<ReplaceOutcome>
  /** True if there was such an account. */
  remove(username: string): Promise<boolean>
}

/** A login: the refresh tokens issued for it, one after another, and its access tokens' `sid`. */
export interface SessionRecord {
  readonly id: string
  readonly userId: string
  readonly username: string
  readonly createdAt: string
  /** Nothing of the session is valid after this (the refresh token's lifetime from login). */
  readonly expiresAt: string
  readonly revokedAt: string | null
}

/**
 * The successor of a spent refresh token, as the spend that rotated it chose it: the new
 * refresh token and access token are derived from the spent token and this, so a repeat
 * within the reuse window hands out the very same pair without the store holding it.
 */
export interface RefreshGrant {
  /** Random, chosen by the first spend. */
  readonly seed: string
  /** When the token was spent (ms since the epoch): the new pair's issue time. */
  readonly at: number
}

/** The successor a spend offers: its hash, and the seed it was derived with. */
export interface RefreshSuccessor {
  readonly hash: string
  readonly seed: string
}

/** What spending a refresh token did. */
export type RefreshOutcome =
  /** Spent now (repeat false, grant is the one offered), or spent within the reuse window before (repeat true, the first spend's grant). */
  | {
      readonly outcome: 'rotated'
      readonly session: SessionRecord
      readonly grant: RefreshGrant
      readonly repeat: boolean
    }
  /** The token was spent already: the session is revoked now. */
  | { readonly outcome: 'reused'; readonly session: SessionRecord }
  /** The session was revoked (or expired) before. */
  | { readonly outcome: 'revoked'; readonly session: SessionRecord }
  | { readonly outcome: 'unknown' }

export interface SessionStore {
  /** Stores a new session whose current refresh token has hash `refreshHash`. */
  create(session: SessionRecord, refreshHash: string): Promise<void>
  get(id: string): Promise<SessionRecord | null>
  /**
   * Atomically spends the refresh token of hash `hash` and makes `next` the session's
   * current one. A token spent before revokes its session (`revokedAt` = now): someone
   * holds a copy. Except a repeat: spent at most `reuseWindowMs` ago and its successor not
   * yet spent (two tabs refreshing at once), which is 'rotated' again with the first
   * spend's grant, and `next` is dropped. An expired session is 'revoked'.
   */
  rotateRefresh(hash: string, next: RefreshSuccessor, now: Date, reuseWindowMs: number): Promise<RefreshOutcome>
  /** Marks the session revoked; false if there is no such session. */
  revoke(id: string, now: Date): Promise<boolean>
}

/** A JWT signing key pair. The private half is sealed (encrypted) by the token side before it gets here. */
export interface SigningKeyRecord {
  readonly kid: string
  readonly alg: 'EdDSA'
  /** The public JWK, as published at /.well-known/jwks.json. */
  readonly publicJwk: Readonly<Record<string, string>>
  readonly sealedPrivateKey: string
  readonly createdAt: string
  /** The key is dropped after this: every token it signed has expired. */
  readonly expiresAt: string
}

export interface SigningKeyStore {
  /** Every key in the order added; the last one is the one to sign with. */
  list(): Promise<SigningKeyRecord[]>
  /**
   * Adds `key` as the newest key, but only if the newest is still `expectedLatest` (null:
   * there is none): of several instances rotating at once, one wins. False if not added.
   */
  addIfLatest(key: SigningKeyRecord, expectedLatest: string | null): Promise<boolean>
  /** Drops a key (never the newest). */
  remove(kid: string): Promise<void>
}

export interface Stores {
  readonly kind: 'redis' | 'embedded'
  readonly keys: KeyStore
  readonly ownership: OwnershipStore
  readonly usage: UsageStore
  readonly streams: StreamJournal
  readonly accounts: AccountStore
  readonly sessions: SessionStore
  readonly signingKeys: SigningKeyStore
  /** Embedded only: tollgate.db's group commit, which budgets' spend joins (limits/budget-ledger.ts). */
  readonly turnCommit?: TurnCommit
  /** True when the store answers now. */
  ping(): Promise<boolean>
  close(): Promise<void>
}
