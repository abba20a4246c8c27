// A gateway whose plans are only the tiers a test names, with a priced model to charge.
import { startTollgate, type RunningTollgate } from './gateway.ts'

/** A model of the default configuration, and plan prices that make every charge visible. */
export const PRICED_MODEL = 'Mistral-Small-24B-Instruct-2501'
export const PRICED = { input_price: 1.1, output_price: 3.3 }

/** Starts a gateway whose plans are `tiers`, `defaultTier` the tier of a key that names none. */
export function startWithTiers(defaultTier: string, tiers: Record<string, unknown>): Promise<RunningTollgate> {
  return startTollgate({
    config: (doc) => {
      doc.plans = { defaultTier, tiers }
    },
  })
}
