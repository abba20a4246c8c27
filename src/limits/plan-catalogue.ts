// Converts the provider's plan catalogue export into our plans format. `tollgate plans
// import FILE` prints the YAML; config/plans.yaml was made by it from
// config/catalogue/plans-2026-01-19.json. Three generations of the export are read (all
// three are in config/catalogue/), by one parser that takes what each one has:
//  - legacy: packages "Tarif <Tier> Template", numeric limits where 0 means none;
//  - 2026-01-19: adds displayModelName; childrenPackages may be null, and a model name may
//    carry stray whitespace (" gemini-3-pro"), which is trimmed;
//  - 2026-04-24 (the provider's next catalogue): packages named by their tier (Essential,
//    Professional, Agentic, Test); a limit may be a phrase instead of a number ("Dynamic
//    Shared Quota", "dynamic") where the provider allocates capacity as it goes; adds
//    contextWindow ("128K"), termsOfUseUrl, modelLabel, modelTier, modelQuotaMetadata.
import { z } from 'zod'
import type { CatalogueFacts, ModelLimits, PlansConfig, TierConfig } from '../config/schema.ts'

/** A number, or the provider's words for a limit it does not fix ("Dynamic Shared Quota"). */
const limitValue = z.union([z.number(), z.string()])
const quotaEntry = z.object({
  exactModelName: z.string(),
  inputTokenPerMinuteLimit: limitValue,
  outputTokenPerMinuteLimit: limitValue,
  lifetimeTokenLimit: limitValue,
  requestPerMinuteLimit: limitValue,
  inputPricePerMillionTokens: z.number().min(0),
  outputPricePerMillionTokens: z.number().min(0),
  displayModelName: z.string().nullish(),
  deploymentRegion: z.string().nullish(),
  contextWindow: z.string().nullish(),
  termsOfUseUrl: z.string().nullish(),
  modelLabel: z.string().nullish(),
})
const cataloguePackage = z.object({
  packageName: z.string(),
  isActive: z.boolean(),
  modelQuotaConfigs: z.array(quotaEntry),
})
const catalogueExport = z.array(cataloguePackage).min(1)
type QuotaEntry = z.infer<typeof quotaEntry>

export interface ImportOptions {
  /** The tier of keys that name none; default Basic when the export has it, else its first tier. */
  readonly defaultTier?: string | undefined
  /** How the export is named in the tiers' descriptions and the catalogue block (e.g. its file name). */
  readonly source?: string
}

export interface ImportedPlans {
  readonly plans: PlansConfig
  /** Things the operator should know about: limits the export leaves to the provider's discretion. */
  readonly notes: readonly string[]
}

/** "Tarif Standard1000 Template" → "Standard1000"; "Essential" → "Essential". */
export function tierName(packageName: string): string {
  return packageName
    .trim()
    .replace(/^Tarif\s+/i, '')
    .replace(/\s+Template$/i, '')
    .replace(/\s+/g, '')
}

export function importPlanCatalogue(input: unknown, options: ImportOptions = {}): ImportedPlans {
  const source = options.source ?? 'the provider catalogue'
  const parsed = catalogueExport.safeParse(input)
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`)
    throw new Error(`not a plan catalogue export: ${problems.join('; ')}`)
  }
  const packages = parsed.data.filter((p) => p.isActive)
  const tiers: Record<string, TierConfig> = {}
  const facts: Record<string, CatalogueFacts> = {}
  const notes: string[] = []
  for (const pkg of packages) {
    const tier = tierName(pkg.packageName)
    if (tier === '' || tier in tiers)
      throw new Error(`package "${pkg.packageName}": tier name "${tier}" is empty or given twice`)
    const models: Record<string, ModelLimits> = {}
    const textModels: ModelLimits[] = []
    for (const entry of pkg.modelQuotaConfigs) {
      const name = entry.exactModelName.trim()
      if (name === '') throw new Error(`package "${pkg.packageName}": a model without a name`)
      if (name in models) throw new Error(`package "${pkg.packageName}": model "${name}" is listed twice`)
      const dynamic = dynamicLimits(entry)
      if (dynamic.length > 0) {
        notes.push(
          `${tier} / ${name}: ${dynamic.join(', ')} not fixed by the provider ("${String(entry.requestPerMinuteLimit)}"); no limit on ${dynamic.length === 1 ? 'it' : 'them'} here, set one if you need it`,
        )
      }
      const limits = dropUnset({
        rpm: fixed(entry.requestPerMinuteLimit),
        input_tpm: fixed(entry.inputTokenPerMinuteLimit),
        output_tpm: fixed(entry.outputTokenPerMinuteLimit),
        quota: fixed(entry.lifetimeTokenLimit),
        input_price: entry.inputPricePerMillionTokens,
        output_price: entry.outputPricePerMillionTokens,
      })
      models[name] = limits
      if (!isSpeechToText(name, entry)) textModels.push(limits)
      // The first package that lists a model speaks for it (the exports agree across packages).
      facts[name] ??= factsOf(entry)
    }
    tiers[tier] = {
      description: `${pkg.packageName.trim()} (imported from ${source})`,
      default: conservativeDefault(textModels),
      models,
    }
  }
  const names = Object.keys(tiers)
  const defaultTier = options.defaultTier ?? (names.includes('Basic') ? 'Basic' : names[0])
  if (defaultTier === undefined) throw new Error('the catalogue has no active package')
  if (!(defaultTier in tiers))
    throw new Error(`default tier "${defaultTier}" is not in the catalogue (tiers: ${names.join(', ')})`)
  const catalogue = {
    source,
    models: Object.fromEntries(Object.entries(facts).filter(([, f]) => Object.keys(f).length > 0)),
  }
  return { plans: { defaultTier, tiers, catalogue }, notes }
}

/**
 * Speech-to-text entries count their "tokens" in another unit (whisper-large-v3: 109 a
 * minute on Basic) and would make the tier's default, the tightest of its limits, too small
 * for any chat call to a model the tier does not list. The exports before 2026-04-24 say
 * nothing of a model's kind, so its name tells (the provider's STT models are Whisper);
 * the next export's label says STT.
 */
function isSpeechToText(name: string, entry: QuotaEntry): boolean {
  return /\bSTT\b/.test(entry.modelLabel ?? '') || /whisper/i.test(name)
}

/** A positive whole number is a limit; 0 (the legacy "none") and the provider's phrases are not. */
function fixed(value: number | string): number | undefined {
  const n = typeof value === 'number' ? value : /^\s*\d+\s*$/.test(value) ? Number(value) : undefined
  return n !== undefined && Number.isInteger(n) && n > 0 ? n : undefined
}

function dynamicLimits(entry: QuotaEntry): string[] {
  const fields = {
    rpm: entry.requestPerMinuteLimit,
    input_tpm: entry.inputTokenPerMinuteLimit,
    output_tpm: entry.outputTokenPerMinuteLimit,
    quota: entry.lifetimeTokenLimit,
  }
  return Object.entries(fields)
    .filter(([, v]) => typeof v === 'string' && fixed(v) === undefined)
    .map(([k]) => k)
}

function factsOf(entry: QuotaEntry): CatalogueFacts {
  return dropUnset({
    display_name: entry.displayModelName?.trim() || undefined,
    deployment_region: entry.deploymentRegion?.trim() || undefined,
    max_sequence_length: contextTokens(entry.contextWindow),
    license: entry.termsOfUseUrl?.trim() || undefined,
  })
}

/**
 * "128K" → 128000, "1M" → 1000000, "448" → 448. Read as decimal: the exports write 200K for
 * Claude's 200,000 as well as 8K for an 8,192-token window, and reading both the small way
 * never promises a client more context than the model has.
 */
export function contextTokens(text: string | null | undefined): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([KM]?)\s*$/i.exec(text ?? '')
  if (!match) return undefined
  const scale = { '': 1, K: 1_000, M: 1_000_000 }[(match[2] ?? '').toUpperCase() as '' | 'K' | 'M']
  const n = Math.round(Number(match[1]) * scale)
  return n > 0 ? n : undefined
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
