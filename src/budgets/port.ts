// Budgets: spend limits in money, set on a key, an owner (all of a user's keys) or a tenant
// (every owner whose account is in it), or given to a tier's keys by the plans. What is set
// through the admin API is kept in a BudgetStore (SQLite budgets.db, or a Redis hash);
// what a call's admission is checked against is a BudgetSpec, resolved from both by the
// book (book.ts) and charged by the limiter in the same atomic step as its rate limits.
import type { BudgetPeriod } from './period.ts'

export const SCOPES = ['key', 'owner', 'tenant'] as const
export type BudgetScope = (typeof SCOPES)[number]

/** A budget set through the admin API. */
export interface BudgetRecord {
  readonly scope: BudgetScope
  readonly id: string
  /** Integer nano-units of the plans' currency (keys/money.ts). */
  readonly amountNanos: number
  readonly period: BudgetPeriod
  /** IANA zone; null: the configured budgets.timeZone. */
  readonly timeZone: string | null
  /** Percentages; null: the configured budgets.thresholds. */
  readonly thresholds: readonly number[] | null
  /** New on every change: thresholds crossed under an older revision are reported again. */
  readonly revision: string
  readonly updatedAt: string
}

/** A budget as admission applies it: everything resolved. */
export interface BudgetSpec {
  readonly scope: BudgetScope
  readonly id: string
  readonly amountNanos: number
  readonly period: BudgetPeriod
  readonly timeZone: string
  readonly thresholds: readonly number[]
  readonly revision: string
  /** Set through the admin API, or the default of the key's tier. */
  readonly origin: 'set' | 'plan'
}

/** A threshold crossed, reported once per budget, period and revision (the events outbox takes it). */
export interface BudgetThresholdEvent {
  readonly scope: BudgetScope
  readonly id: string
  readonly period: BudgetPeriod
  /** ISO time the period began (1970-01-01T00:00:00.000Z for the lifetime). */
  readonly periodStart: string
  /** The percentage crossed. */
  readonly threshold: number
  /** Spent in the period after the call that crossed it, currency units. */
  readonly spent: number
  readonly amount: number
  readonly currency: string
}

export type OnBudgetThreshold = (event: BudgetThresholdEvent) => void | Promise<void>

export interface BudgetStore {
  readonly kind: 'redis' | 'embedded'
  list(): Promise<BudgetRecord[]>
  /** Changes whenever a budget is set or cleared (by any instance). */
  version(): Promise<string>
  put(record: BudgetRecord): Promise<void>
  /** False when there was none. */
  remove(scope: BudgetScope, id: string): Promise<boolean>
  close(): Promise<void>
}

export function isBudgetRecord(v: unknown): v is BudgetRecord {
  if (typeof v !== 'object' || v === null) return false
  const r = v as Record<string, unknown>
  return (
    typeof r.scope === 'string' &&
    (SCOPES as readonly string[]).includes(r.scope) &&
    typeof r.id === 'string' &&
    typeof r.amountNanos === 'number' &&
    Number.isSafeInteger(r.amountNanos) &&
    typeof r.period === 'string' &&
    (r.timeZone === null || typeof r.timeZone === 'string') &&
    (r.thresholds === null || (Array.isArray(r.thresholds) && r.thresholds.every((x) => typeof x === 'number'))) &&
    typeof r.revision === 'string' &&
    typeof r.updatedAt === 'string'
  )
}
