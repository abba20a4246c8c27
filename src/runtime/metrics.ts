// What the reloads of the configuration show on /metrics, beside the gateway's own metrics
// (in the same registry): Prometheus's own names for its reloads, with the loaded files'
// hashes as labels of an info gauge, so a fleet is seen at a glance to run one file.
import { Counter, Gauge, type Registry } from 'prom-client'
import type { ReloadOutcome } from './reload.ts'

export interface ReloadMetrics {
  /** A reload ended with `outcome`. */
  reloaded(outcome: ReloadOutcome): void
  /** The configuration in force is now the one with these hashes, loaded at `at` (epoch ms). */
  inForce(hash: string, plansHash: string | null, at: number): void
}

export function reloadMetrics(registry: Registry): ReloadMetrics {
  const registers = [registry]
  const reloads = new Counter({
    name: 'tollgate_config_reloads_total',
    help: 'Reloads of the configuration file (SIGHUP, POST /admin/reload), by outcome: applied, unchanged, invalid, restart_required, failed',
    labelNames: ['outcome'],
    registers,
  })
  const successful = new Gauge({
    name: 'tollgate_config_last_reload_successful',
    help: '1 when the last reload was applied (or found nothing to change), 0 when it was refused or failed',
    registers,
  })
  const successAt = new Gauge({
    name: 'tollgate_config_last_reload_success_timestamp_seconds',
    help: 'When the configuration in force was loaded (boot or the last applied reload), Unix seconds',
    registers,
  })
  const info = new Gauge({
    name: 'tollgate_config_info',
    help: 'Always 1, labelled with the sha256 of the configuration file in force (and of its plans file, when separate)',
    labelNames: ['hash', 'plans_hash'],
    registers,
  })
  successful.set(1)
  return {
    reloaded(outcome) {
      reloads.inc({ outcome })
      successful.set(outcome === 'applied' || outcome === 'unchanged' ? 1 : 0)
    },
    inForce(hash, plansHash, at) {
      info.reset()
      info.set({ hash, plans_hash: plansHash ?? '' }, 1)
      successAt.set(Math.floor(at / 1000))
    },
  }
}
