// `tollgate reload`, SIGHUP and POST /admin/reload: read the configuration file again,
// validate it whole exactly as at boot (config/load.ts), and put the snapshot it makes in
// force for the calls that start from then on (snapshot.ts). A file that does not validate,
// or that changes a setting only a restart applies (config/live-settings.ts), is refused
// with the paths of those fields, and the gateway goes on with the configuration it runs.
// Each reload is counted by outcome and logged once, with the file's sha256.
// Reloads run one at a time: a second one asked meanwhile waits for the first.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import { ConfigError, type LoadedConfig } from '../config/load.ts'
import { changedLiveSections, restartOnlyChanges } from '../config/live-settings.ts'
import type { Logger } from '../observability/logger.ts'
import type { ReloadMetrics } from './metrics.ts'
import type { Runtime, RuntimeHolder } from './snapshot.ts'

/**
 * applied: the new file is in force. unchanged: the file is the one in force (same hashes).
 * invalid: it does not validate. restart_required: it changes settings a reload cannot
 * apply. failed: it validated but could not be put in force (an adapter would not start).
 */
export type ReloadOutcome = 'applied' | 'unchanged' | 'invalid' | 'restart_required' | 'failed'

/** What one instance says of a reload: what it runs now, and why not the file when it was refused. */
export interface ReloadReport {
  /** The instance's id (as in its queue leases and journalled streams), its host and pid. */
  readonly instance: string
  readonly host: string
  readonly pid: number
  readonly outcome: ReloadOutcome
  /** sha256 of the configuration file in force after this reload (the previous one's when refused). */
  readonly hash: string
  readonly plansHash: string | null
  /** When the configuration in force was loaded (ISO 8601). */
  readonly loadedAt: string
  /** sha256 of the file that was read this time (a refused one too), or null when it could not be read. */
  readonly fileHash: string | null
  /** The live sections whose content changed (applied). */
  readonly changed: readonly string[]
  /** Why it was refused: bad fields (`path: message`) or the settings that need a restart. */
  readonly problems: readonly string[]
}

export interface Reloader {
  reload(): Promise<ReloadReport>
}

export interface ReloaderDeps {
  readonly holder: RuntimeHolder
  /** Reads and validates the file, as at boot; throws ConfigError. */
  readonly load: () => LoadedConfig
  /** Builds the next snapshot beside `previous`. */
  readonly build: (loaded: LoadedConfig, previous: Runtime) => Promise<Runtime>
  /** Lets go of what only `previous` used, once the calls on it are done (not awaited). */
  readonly retire: (previous: Runtime, next: Runtime) => Promise<void>
  /** After `next` was put in force (not awaited; should not throw): what is worth saying about it. */
  readonly applied?: (next: Runtime, changed: readonly string[]) => Promise<void>
  readonly metrics: ReloadMetrics
  readonly log: Logger
  readonly instance: string
}

export function createReloader(deps: ReloaderDeps): Reloader {
  const { holder, log } = deps
  let chain: Promise<unknown> = Promise.resolve()
  const report = (outcome: ReloadOutcome, rest: Partial<ReloadReport> = {}): ReloadReport => {
    const running = holder.current
    return {
      instance: deps.instance,
      host: hostname(),
      pid: process.pid,
      outcome,
      hash: running.hash,
      plansHash: running.plansHash,
      loadedAt: new Date(running.loadedAt).toISOString(),
      fileHash: null,
      changed: [],
      problems: [],
      ...rest,
    }
  }

  async function once(): Promise<ReloadReport> {
    const running = holder.current
    let loaded: LoadedConfig
    try {
      loaded = deps.load()
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      return report('invalid', { fileHash: hashOf(running.config.source), problems: error.problems })
    }
    const fileHash = loaded.hash
    const restart = restartOnlyChanges(running.config, loaded.config)
    if (restart.length > 0)
      return report('restart_required', {
        fileHash,
        problems: restart.map((path) => `${path}: changed, but only a restart applies it`),
      })
    if (loaded.hash === running.hash && loaded.plansHash === running.plansHash) return report('unchanged', { fileHash })
    const changed = changedLiveSections(running.config, loaded.config)
    let next: Runtime
    try {
      next = await deps.build(loaded, running)
    } catch (error) {
      return report('failed', { fileHash, problems: [(error as Error).message] })
    }
    holder.swap(next)
    deps.metrics.inForce(next.hash, next.plansHash, next.loadedAt)
    deps
      .retire(running, next)
      .catch((error: unknown) =>
        log.warn({ err: (error as Error).message }, 'reload: closing what the previous configuration used failed'),
      )
    return report('applied', { fileHash, changed })
  }

  return {
    reload() {
      const done = chain.then(once).then((result) => {
        deps.metrics.reloaded(result.outcome)
        const fields = {
          outcome: result.outcome,
          hash: result.hash,
          plansHash: result.plansHash,
          fileHash: result.fileHash,
          file: holder.current.config.source,
          ...(result.changed.length > 0 ? { changed: result.changed } : {}),
          ...(result.problems.length > 0 ? { problems: result.problems } : {}),
        }
        if (result.outcome === 'applied' || result.outcome === 'unchanged')
          log.info(fields, `configuration reload: ${result.outcome}`)
        else
          log.warn(
            fields,
            `configuration reload refused (${result.outcome}); the previous configuration stays in force`,
          )
        return result
      })
      chain = done.catch(() => undefined)
      return done
    },
  }
}

/** The sha256 of a file's bytes, or null when it cannot be read. */
function hashOf(path: string): string | null {
  try {
    return createHash('sha256').update(readFileSync(path)).digest('hex')
  } catch {
    return null
  }
}
