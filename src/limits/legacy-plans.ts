// Converts a provider's legacy plan export (shared/data/plans-legacy.json) into our plans
// format. `tollgate plans import FILE` prints the YAML; config/plans.yaml was made by it.
import { z } from 'zod'
import type { ModelLimits, PlansConfig, TierConfig } from '../config/schema.ts'

const legacyQuota = z.object({
  exactModelName: z.string(),
  inputTokenPerMinuteLimit: z.number(),
  outputTokenPerMinuteLimit: z.number(),
  lifetimeTokenLimit: z.number(),
  requestPerMinuteLimit: z.number(),
  inputPricePerMillionTokens: z.number(),
  outputPricePerMillionTokens: z.number(),
})
const legacyPackage = z.object({
  packageName: z.string(),
  isActive: z.boolean(),
  modelQuotaConfigs: z.array(legacyQuota),
})
const legacyCatalogue = z.array(legacyPackage)

/** "Tarif Standard1000 Template" → "Standard1000". */
export function tierName(packageName: string): string {
  return packageName.replace(/^Tarif\s+/i, '').replace(/\s+Template$/i, '').replace(/\s+/g, '')
}

const positive = (n: number): number | undefined => (n > 0 ? n : undefined)

export function convertLegacyPlans(input: unknown, defaultTier = 'Basic'): PlansConfig {
  const catalogue = legacyCatalogue.parse(input)
  const tiers: Record<string, TierConfig> = {}
  for (const pkg of catalogue.filter((p) => p.isActive)) {
    const models: Record<string, ModelLimits> = {}
    for (const q of pkg.modelQuotaConfigs) {
      models[q.exactModelName] = dropUnset({
        rpm: positive(q.requestPerMinuteLimit),
        input_tpm: positive(q.inputTokenPerMinuteLimit),
        output_tpm: positive(q.outputTokenPerMinuteLimit),
        quota: positive(q.lifetimeTokenLimit),
        input_price: q.inputPricePerMillionTokens,
        output_price: q.outputPricePerMillionTokens,
      })
    }
    tiers[tierName(pkg.packageName)] = {
      description: `${pkg.packageName} (imported from the legacy catalogue)`,
      default: conservativeDefault(Object.values(models)),
      models,
    }
  }
  if (!(defaultTier in tiers)) throw new Error(`default tier "${defaultTier}" is not in the catalogue`)
  return { defaultTier, tiers }
}

/** A model the tier does not list gets the tightest limits the tier has, and no price. */
function conservativeDefault(all: ModelLimits[]): ModelLimits {
  const min = (pick: (m: ModelLimits) => number | undefined): number | undefined => {
    const values = all.map(pick).filter((v): v is number => v !== undefined)
    return values.length ? Math.min(...values) : undefined
  }
  return dropUnset({ rpm: min((m) => m.rpm), input_tpm: min((m) => m.input_tpm), output_tpm: min((m) => m.output_tpm) })
}

function dropUnset<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T
}
