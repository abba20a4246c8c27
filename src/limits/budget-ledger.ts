// Budgets' spend kept durably in embedded mode, in tollgate.db beside the usage rows. The
// snapshot (limits.json) is written every 10 s, so a gateway killed between two snapshots
// would forget what calls spent since the last one and could overspend its budgets after a
// restart. Every settle's outcome is written here instead: each budget counter's spent after
// it, and the once id (a stored request's charge) it committed under.
//
// The writes join the store's group commit (store/sqlite.ts turnCommit): a turn's settles and
// the same turn's usage rows are one transaction, committed at the turn's end before
// turnWritten() resolves and so before the reply's last bytes. A gateway killed at any
// instant keeps a call's spend and its usage row both or neither (the relay settles and
// meters a call in the same turn: inference/reply.ts). At boot the limiter lays what is kept
// here over the snapshot: this table is never older than it.
import type { DatabaseSync } from 'node:sqlite'
import type { TurnCommit } from '../store/sqlite.ts'

/** Created on first use in the store's file: the tables are the ledger's, not the store's schema. */
const TABLES = `CREATE TABLE IF NOT EXISTS budget_spent (name TEXT PRIMARY KEY, spent INTEGER NOT NULL, expires_at INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS budget_once (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;`

/** A spent counter: its name, value (nano-units) and when it is forgotten (0: never). */
export type SpentCell = readonly [name: string, spent: number, expiresAt: number]
/** A once id and when it is forgotten. */
export type OnceCell = readonly [id: string, expiresAt: number]

/** What a settle changed, to keep: called synchronously by the memory counters' settle. */
export type BudgetJournal = (spent: readonly SpentCell[], once: OnceCell | undefined) => void

export interface BudgetLedger {
  readonly journal: BudgetJournal
  /** What was kept and is still alive, in the snapshot's shape (memory-counters.ts MemorySnapshot.budgets). */
  read(): { spent: SpentCell[]; once: OnceCell[] }
}

/** The ledger on `turn`'s file (tollgate.db): its writes commit with whatever else that turn wrote there. */
export function openBudgetLedger(turn: TurnCommit): BudgetLedger {
  const db: DatabaseSync = turn.db
  db.exec(TABLES)
  const sweep = (now: number): void => {
    db.prepare('DELETE FROM budget_spent WHERE expires_at <> 0 AND expires_at <= ?').run(now)
    db.prepare('DELETE FROM budget_once WHERE expires_at <= ?').run(now)
  }
  sweep(Date.now())
  const putSpent = db.prepare(`INSERT INTO budget_spent (name, spent, expires_at) VALUES (?, ?, ?)
    ON CONFLICT (name) DO UPDATE SET spent = excluded.spent, expires_at = excluded.expires_at`)
  const putOnce = db.prepare('INSERT OR REPLACE INTO budget_once (id, expires_at) VALUES (?, ?)')
  // The turn's changes; a counter changed twice in a turn keeps its last value (settles are serial).
  let pending: { spent: Map<string, SpentCell>; once: OnceCell[] } | null = null
  let commits = 0

  function write(): void {
    const changes = pending
    pending = null
    if (changes === null) return
    for (const [name, spent, at] of changes.spent.values()) putSpent.run(name, spent, at)
    for (const [id, at] of changes.once) putOnce.run(id, at)
    if (++commits % 1000 === 0) sweep(Date.now())
  }

  return {
    journal(spent, once) {
      if (pending === null) {
        pending = { spent: new Map(), once: [] }
        turn.add(write)
      }
      for (const cell of spent) pending.spent.set(cell[0], cell)
      if (once !== undefined) pending.once.push(once)
    },
    read() {
      const now = Date.now()
      const spent = db
        .prepare('SELECT name, spent, expires_at FROM budget_spent WHERE expires_at = 0 OR expires_at > ?')
        .all(now)
        .map((r): SpentCell => [String(r.name), Number(r.spent), Number(r.expires_at)])
      const once = db
        .prepare('SELECT id, expires_at FROM budget_once WHERE expires_at > ?')
        .all(now)
        .map((r): OnceCell => [String(r.id), Number(r.expires_at)])
      return { spent, once }
    },
  }
}
