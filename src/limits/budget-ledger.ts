// Budgets' spend kept durably in embedded mode: budget-spend.db in the data directory. The
// snapshot (limits.json) is written every 10 s, so a gateway killed between two snapshots
// would forget what calls spent since the last one and could overspend its budgets after a
// restart. Every settle's outcome is written here instead: each budget counter's spent after
// it, and the once id (a stored request's charge) it committed under, in one transaction so
// a charge the file kept is known as applied and one it lost is not.
//
// The writes of one turn of the event loop share one commit at the turn's end, before
// turnWritten() resolves (turn-batches.ts) — the same moment the usage rows of that turn are
// committed to tollgate.db, before the reply's last bytes go out. Nothing on the reply path
// waits for it beyond what the usage write already does. At boot the limiter lays what is
// kept here over the snapshot: this file is never older than it.
import type { DatabaseSync } from 'node:sqlite'
import type { Logger } from '../observability/logger.ts'
import { closeSqlite, openSqlite, transaction } from '../store/sqlite.ts'
import { flushAtTurnEnd } from '../turn-batches.ts'

export const BUDGET_LEDGER_FILE = 'budget-spend.db'

const MIGRATIONS = [
  `CREATE TABLE budget_spent (name TEXT PRIMARY KEY, spent INTEGER NOT NULL, expires_at INTEGER NOT NULL);
   CREATE TABLE budget_once (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL) WITHOUT ROWID;`,
]

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
  /** Commits what is pending and closes the file. */
  close(): void
}

export function openBudgetLedger(dataDir: string, log: Logger): BudgetLedger {
  const db: DatabaseSync = openSqlite(dataDir, BUDGET_LEDGER_FILE, MIGRATIONS)
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

  function commit(): void {
    const turn = pending
    pending = null
    if (turn === null) return
    try {
      transaction(db, () => {
        for (const [name, spent, at] of turn.spent.values()) putSpent.run(name, spent, at)
        for (const [id, at] of turn.once) putOnce.run(id, at)
        if (++commits % 1000 === 0) sweep(Date.now())
      })
    } catch (error) {
      // The counters in memory stay authoritative; the snapshot still keeps them.
      log.error({ err: error instanceof Error ? error.message : String(error) }, 'budget spend could not be kept')
    }
  }

  return {
    journal(spent, once) {
      if (pending === null) {
        pending = { spent: new Map(), once: [] }
        flushAtTurnEnd(commit)
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
    close() {
      commit()
      closeSqlite(db)
    },
  }
}
