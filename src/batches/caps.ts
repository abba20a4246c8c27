// A batch's bounds, per tier (config `plans.tiers.<tier>.batches`, docs/batches.md): lines
// per batch, bytes of its input file, unfinished batches per key. A tier that says nothing
// gets OpenAI's published bounds (50,000 requests, 200 MB) and 20 open batches per key.
import type { PlansConfig } from '../config/schema.ts'
import type { KeyRecord } from '../keys/record.ts'
import { tierOf } from '../limits/plans.ts'

export interface BatchCaps {
  /** Lines one batch may hold. */
  readonly maxLines: number
  /** Bytes of an input file. */
  readonly maxFileBytes: number
  /** Unfinished batches one key may have. */
  readonly maxOpen: number
}

export const DEFAULT_BATCH_CAPS: BatchCaps = { maxLines: 50_000, maxFileBytes: 200 * 1024 * 1024, maxOpen: 20 }

/** The caps of a key's batches, on its tier's configuration in force now. */
export function batchCapsOf(plans: PlansConfig, key: Pick<KeyRecord, 'tier'>): BatchCaps {
  const set = plans.tiers[tierOf(key, plans)]?.batches
  return {
    maxLines: set?.maxLines ?? DEFAULT_BATCH_CAPS.maxLines,
    maxFileBytes: set?.maxFileBytes ?? DEFAULT_BATCH_CAPS.maxFileBytes,
    maxOpen: set?.maxOpen ?? DEFAULT_BATCH_CAPS.maxOpen,
  }
}
