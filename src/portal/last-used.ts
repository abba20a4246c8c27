// "Last used" of a key: the last UTC day the meter counted a call of it, over the longest
// range a usage query covers. The same store and rows as the usage pages.
import { MAX_USAGE_DAYS } from '../admin/usage.ts'
import { utcDay } from '../keys/meter.ts'
import type { UsageRecord } from '../store/ports.ts'
import type { PortalDeps } from './guard.ts'

export async function usageRows(
  deps: Pick<PortalDeps, 'meter' | 'usage'>,
  range: { from: string; to: string },
  keyIds: ReadonlySet<string>,
): Promise<UsageRecord[]> {
  // Rows this instance holds for a retry first, as /admin/usage does.
  await deps.meter.flush()
  if (keyIds.size === 1) {
    const [only] = keyIds
    return only === undefined ? [] : deps.usage.query({ keyId: only, ...range })
  }
  return (await deps.usage.query(range)).filter((row) => keyIds.has(row.keyId))
}

export async function lastUsedDays(
  deps: Pick<PortalDeps, 'meter' | 'usage'>,
  keyIds: ReadonlySet<string>,
  now = new Date(),
): Promise<Map<string, string>> {
  if (keyIds.size === 0) return new Map()
  const to = utcDay(now)
  const from = utcDay(new Date(now.getTime() - (MAX_USAGE_DAYS - 1) * 86_400_000))
  const last = new Map<string, string>()
  for (const row of await usageRows(deps, { from, to }, keyIds)) {
    const seen = last.get(row.keyId)
    if (row.requests > 0 && (seen === undefined || row.day > seen)) last.set(row.keyId, row.day)
  }
  return last
}
