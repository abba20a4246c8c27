// Which settings a running gateway can take from a reloaded file, and which only a restart
// applies. Live: what a call reads from the runtime snapshot it captures at its start
// (runtime/snapshot.ts). Everything else was built into the process at boot: listeners,
// the store and its Redis connections, the limiter's windows and outage policy, the queue's
// workers, authentication and the portal, the logger, the built-in RAG mock.
//
// A reload whose file changes any setting of the second kind is refused whole and names
// them (as Envoy refuses a listener update that changes its address): a gateway that says
// "reloaded" runs exactly the file it names by its hash, and a restart applies the rest.
import type { Config } from './schema.ts'

/** Top-level sections a reload applies (`rag.mock` excepted: the mock is started at boot). */
export const LIVE_SECTIONS = [
  'plans',
  'models',
  'backends',
  'resourceBackend',
  'defaultMaxTokens',
  'fineTuning',
  'storageCaps',
  'rag',
  'guardrails',
] as const satisfies ReadonlyArray<keyof Config>

/** Parts of a live section that still need a restart. */
const RESTART_INSIDE_LIVE: readonly string[] = ['rag.mock']

/** Derived at load, not settings of the file: secrets come from the environment, which a reload does not re-read. */
const DERIVED: readonly string[] = ['secrets', 'source', 'redis']

/** The most paths a refusal lists; the rest are counted. */
const MAX_LISTED = 20

/**
 * The settings (dotted paths, as a bad field is named at boot) that differ between the
 * running configuration and `next` and need a restart; empty when a reload may apply `next`.
 */
export function restartOnlyChanges(running: Config, next: Config): string[] {
  const found: string[] = []
  const keys = new Set([...Object.keys(running), ...Object.keys(next)])
  for (const key of keys) {
    if (DERIVED.includes(key)) continue
    const a = (running as unknown as Record<string, unknown>)[key]
    const b = (next as unknown as Record<string, unknown>)[key]
    if ((LIVE_SECTIONS as readonly string[]).includes(key)) {
      for (const inside of RESTART_INSIDE_LIVE.filter((p) => p.startsWith(`${key}.`))) {
        const [, child = ''] = inside.split('.')
        differences(field(a, child), field(b, child), inside, found)
      }
      continue
    }
    differences(a, b, key, found)
  }
  if (found.length <= MAX_LISTED) return found
  return [...found.slice(0, MAX_LISTED), `(and ${found.length - MAX_LISTED} more)`]
}

/** The live sections whose content differs, for the reload's report. */
export function changedLiveSections(running: Config, next: Config): string[] {
  return LIVE_SECTIONS.filter((key) => {
    const found: string[] = []
    differences(running[key], next[key], key, found)
    return found.length > 0
  })
}

function field(value: unknown, name: string): unknown {
  return isRecord(value) ? value[name] : undefined
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Appends the paths of the leaves where `a` and `b` differ (an array is one leaf). */
function differences(a: unknown, b: unknown, path: string, found: string[]): void {
  if (isRecord(a) && isRecord(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)]))
      differences(a[key], b[key], `${path}.${key}`, found)
    return
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) found.push(path)
}
