// Budgets set through the admin API, embedded: budgets.db in the data directory, one row
// per (scope, id) holding the record as JSON, and a version bumped in the same transaction.
import type { DatabaseSync } from 'node:sqlite'
import { closeSqlite, openSqlite, transaction } from '../store/sqlite.ts'
import { isBudgetRecord, type BudgetRecord, type BudgetStore } from './port.ts'

const MIGRATIONS = [
  `CREATE TABLE budgets (scope TEXT NOT NULL, id TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (scope, id));
   CREATE TABLE budget_version (one INTEGER PRIMARY KEY CHECK (one = 1), version INTEGER NOT NULL);
   INSERT INTO budget_version VALUES (1, 0);`,
]

export function openEmbeddedBudgetStore(dataDir: string): BudgetStore {
  const db: DatabaseSync = openSqlite(dataDir, 'budgets.db', MIGRATIONS)
  const bump = (): void => void db.prepare('UPDATE budget_version SET version = version + 1 WHERE one = 1').run()
  return {
    kind: 'embedded',
    async list() {
      return db
        .prepare('SELECT record FROM budgets ORDER BY scope, id')
        .all()
        .map((row) => JSON.parse(String(row.record)) as unknown)
        .filter(isBudgetRecord)
    },
    async version() {
      return String(db.prepare('SELECT version FROM budget_version WHERE one = 1').get()?.version ?? 0)
    },
    async put(record: BudgetRecord) {
      transaction(db, () => {
        db.prepare('INSERT OR REPLACE INTO budgets (scope, id, record) VALUES (?, ?, ?)').run(
          record.scope,
          record.id,
          JSON.stringify(record),
        )
        bump()
      })
    },
    async remove(scope, id) {
      return transaction(db, () => {
        const removed = Number(db.prepare('DELETE FROM budgets WHERE scope = ? AND id = ?').run(scope, id).changes) > 0
        if (removed) bump()
        return removed
      })
    },
    async close() {
      closeSqlite(db)
    },
  }
}
