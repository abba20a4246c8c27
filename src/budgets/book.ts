// The budget book: every instance's copy of the budgets that apply, so that admission
// reads none on the request path. What is set through the admin API is read from the
// store at start and again whenever the store's version moves (polled every refreshMs,
// and at once on this instance's own changes); a tier's default comes from the plans in
// force, read on every call (a reload that changes a tier's budget applies to the next call).
// Which tenant an owner is in comes from the accounts (an owner is an account's id or
// username), read every tenantRefreshMs while any tenant budget is set.
import { randomBytes } from 'node:crypto'
import type { BudgetConfig, PlansConfig } from '../config/schema.ts'
import { NANOS_PER_UNIT } from '../keys/money.ts'
import type { Logger } from '../observability/logger.ts'
import { createTaskOutage } from '../observability/outage-log.ts'
import type { BudgetRecord, BudgetScope, BudgetSpec, BudgetStore } from './port.ts'

export interface BudgetDefaults {
  readonly timeZone: string
  readonly thresholds: readonly number[]
}

export interface Member {
  readonly id: string
  readonly username: string
  readonly tenant: string
}

export interface BudgetBookOptions {
  readonly store: BudgetStore
  /** The plans in force (the runtime snapshot's: a reload replaces them). */
  readonly plans: () => PlansConfig
  readonly defaults: BudgetDefaults
  readonly refreshMs: number
  /** Every account with its tenant; absent: no owner is in a tenant. */
  readonly members?: () => Promise<readonly Member[]>
  readonly tenantRefreshMs?: number
  readonly log: Logger
}

/** Who a call runs as, for the budgets that apply to it. */
export interface BudgetSubject {
  readonly keyId: string
  readonly owner: string
  readonly tier: string
}

export interface BudgetBook {
  /** What a call by this subject is charged against: the key's (set, else its tier's), its owner's, its tenant's. */
  applicable(subject: BudgetSubject): BudgetSpec[]
  /** The tenant an owner is in, as last read. */
  tenantOf(owner: string): string | undefined
  /** Every budget set through the admin API. */
  list(): readonly BudgetRecord[]
  get(scope: BudgetScope, id: string): BudgetRecord | undefined
  set(scope: BudgetScope, id: string, budget: BudgetConfig): Promise<BudgetRecord>
  clear(scope: BudgetScope, id: string): Promise<boolean>
  /** A record resolved with the configured defaults. */
  specOf(record: BudgetRecord): BudgetSpec
  /** The tier's default budget for a key of it, if the plans give one. */
  tierDefault(keyId: string, tier: string): BudgetSpec | undefined
  /** Reads the store now (start, tests). */
  refresh(): Promise<void>
  close(): Promise<void>
}

const toNanos = (amount: number): number => Math.round(amount * NANOS_PER_UNIT)

export function createBudgetBook(options: BudgetBookOptions): BudgetBook {
  const { store, plans, defaults, log } = options
  let records = new Map<string, BudgetRecord>()
  let version: string | null = null
  let tenants = new Map<string, string>()
  let tenantsReadAt = 0
  let anyTenantBudget = false
  let closed = false
  const id = (scope: string, name: string): string => `${scope}\u0000${name}`

  const specOf = (r: BudgetRecord): BudgetSpec => ({
    scope: r.scope,
    id: r.id,
    amountNanos: r.amountNanos,
    period: r.period,
    timeZone: r.timeZone ?? defaults.timeZone,
    thresholds: r.thresholds ?? defaults.thresholds,
    revision: r.revision,
    origin: 'set',
  })

  // The tiers' defaults, resolved once per plans object (a reload brings a new one); a
  // default's revision follows its content, so a changed plan re-arms its thresholds on
  // every instance alike.
  let tierSpecsOf: { readonly plans: PlansConfig; readonly specs: Map<string, Omit<BudgetSpec, 'id'>> } | null = null
  function tierSpecs(): Map<string, Omit<BudgetSpec, 'id'>> {
    const current = plans()
    if (tierSpecsOf?.plans === current) return tierSpecsOf.specs
    const specs = new Map<string, Omit<BudgetSpec, 'id'>>()
    for (const [tier, config] of Object.entries(current.tiers)) {
      const b = config.budget
      if (b === undefined) continue
      const timeZone = b.timeZone ?? defaults.timeZone
      const thresholds = b.thresholds ?? defaults.thresholds
      specs.set(tier, {
        scope: 'key',
        amountNanos: toNanos(b.amount),
        period: b.period,
        timeZone,
        thresholds,
        revision: `plan.${toNanos(b.amount)}.${b.period}.${timeZone}.${thresholds.join('-')}`,
        origin: 'plan',
      })
    }
    tierSpecsOf = { plans: current, specs }
    return specs
  }

  async function readTenants(): Promise<void> {
    if (options.members === undefined) return
    const next = new Map<string, string>()
    for (const m of await options.members()) {
      next.set(m.id, m.tenant)
      next.set(m.username, m.tenant)
    }
    tenants = next
    tenantsReadAt = Date.now()
  }

  async function refresh(): Promise<void> {
    const seen = await store.version()
    if (seen !== version) {
      const list = await store.list()
      records = new Map(list.map((r) => [id(r.scope, r.id), r]))
      version = seen
      anyTenantBudget = list.some((r) => r.scope === 'tenant')
    }
    if (anyTenantBudget && Date.now() - tenantsReadAt >= (options.tenantRefreshMs ?? 30_000)) await readTenants()
  }

  let timer: NodeJS.Timeout | undefined
  // Once a second during a Redis outage: one line when it starts failing, one when it is over.
  const outage = createTaskOutage(log, 'budgets: refresh')
  const tick = (): void => {
    if (closed) return
    refresh()
      .then(
        () => outage.succeeded(),
        (error: unknown) => outage.failed(error),
      )
      .finally(() => {
        if (!closed) timer = setTimeout(tick, options.refreshMs).unref()
      })
  }
  timer = setTimeout(tick, options.refreshMs).unref()

  return {
    applicable({ keyId, owner, tier }) {
      const out: BudgetSpec[] = []
      const own = records.get(id('key', keyId))
      if (own !== undefined) out.push(specOf(own))
      else {
        const byTier = tierSpecs().get(tier)
        if (byTier !== undefined) out.push({ ...byTier, id: keyId })
      }
      // A key without an owner is its own owner (keys/record.ts): its owner budget would be the key's.
      if (owner !== keyId) {
        const o = records.get(id('owner', owner))
        if (o !== undefined) out.push(specOf(o))
      }
      if (anyTenantBudget) {
        const tenant = tenants.get(owner)
        const t = tenant === undefined ? undefined : records.get(id('tenant', tenant))
        if (t !== undefined) out.push(specOf(t))
      }
      return out
    },
    tenantOf: (owner) => tenants.get(owner),
    list: () => [...records.values()],
    get: (scope, name) => records.get(id(scope, name)),
    async set(scope, name, budget) {
      const record: BudgetRecord = {
        scope,
        id: name,
        amountNanos: toNanos(budget.amount),
        period: budget.period,
        timeZone: budget.timeZone ?? null,
        thresholds: budget.thresholds ?? null,
        revision: randomBytes(6).toString('base64url'),
        updatedAt: new Date().toISOString(),
      }
      await store.put(record)
      await refresh()
      if (scope === 'tenant') await readTenants()
      return record
    },
    async clear(scope, name) {
      const removed = await store.remove(scope, name)
      await refresh()
      return removed
    },
    specOf,
    tierDefault(keyId, tier) {
      const t = tierSpecs().get(tier)
      return t === undefined ? undefined : { ...t, id: keyId }
    },
    refresh,
    async close() {
      closed = true
      clearTimeout(timer)
      await store.close()
    },
  }
}
