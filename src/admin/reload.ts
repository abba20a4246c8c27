// POST /admin/reload: this instance reads its configuration file again (runtime/reload.ts)
// and says what it runs now; with `{"all": true}`, every instance on the same Redis does
// (runtime/fleet.ts) and the answers that came within the wait are listed. A refused file
// is this instance's error (422 invalid, 409 restart required) naming each bad field; in a
// fleet's list each refusal is one instance's answer. GET /admin/config: what runs now.
import { z } from 'zod'
import type { ConfigReload } from '../api/admin.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { Config } from '../config/schema.ts'
import { gatewayError, type ErrorName } from '../errors.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import type { Router } from '../http/router.ts'
import type { FleetReload } from '../runtime/fleet.ts'
import type { Reloader, ReloadOutcome, ReloadReport } from '../runtime/reload.ts'
import type { RuntimeSource } from '../runtime/snapshot.ts'
import { readOptionalJson, sendAdmin } from './http.ts'

export interface ReloadAdminDeps {
  readonly config: Pick<Config, 'server'>
  readonly authenticateAdmin: AdminAuthenticator
  readonly runtime: RuntimeSource<{
    readonly config: Pick<Config, 'source'>
    readonly hash: string
    readonly plansHash: string | null
    readonly loadedAt: number
  }>
  readonly reloader: Reloader
  readonly fleet: FleetReload
  /** This instance's id, as its reports give it. */
  readonly instance: string
}

export const reloadBodySchema = z.strictObject({
  all: z.boolean().default(false).meta({ description: 'Ask every instance on the same Redis, not only this one.' }),
  wait_ms: z.int().min(100).max(60_000).default(5000).meta({
    description: 'With `all`: how long to wait for the instances to answer (they usually answer within milliseconds).',
  }),
})

const REFUSALS: Readonly<Record<Exclude<ReloadOutcome, 'applied' | 'unchanged'>, ErrorName>> = {
  invalid: 'config_invalid',
  restart_required: 'config_restart_required',
  failed: 'config_reload_failed',
}

export function reportBody(report: ReloadReport): z.infer<typeof ConfigReload> {
  return {
    object: 'config.reload',
    instance: report.instance,
    host: report.host,
    pid: report.pid,
    outcome: report.outcome,
    hash: report.hash,
    plans_hash: report.plansHash,
    loaded_at: report.loadedAt,
    file_hash: report.fileHash,
    changed: [...report.changed],
    problems: [...report.problems],
  }
}

export function registerReloadRoutes(router: Router, deps: ReloadAdminDeps): void {
  const limit = deps.config.server.jsonBodyLimitBytes
  const rate = bodyRateOf(deps.config.server)
  router.on('POST', '/admin/reload', async (ctx) => {
    ctx.route = 'admin.reload'
    deps.authenticateAdmin(ctx.req)
    const parsed = reloadBodySchema.safeParse(await readOptionalJson(ctx.req, limit, rate))
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw gatewayError('invalid_body', {
        message: `Invalid body: ${issue?.path.join('.') || '(root)'}: ${issue?.message ?? 'invalid'}.`,
        param: issue?.path.join('.') || null,
      })
    }
    if (parsed.data.all) {
      const { asked, answers } = await deps.fleet.reloadAll(parsed.data.wait_ms)
      sendAdmin(ctx, 200, { object: 'list', asked, data: answers.map(reportBody) })
      return
    }
    const report = await deps.reloader.reload()
    if (report.outcome === 'applied' || report.outcome === 'unchanged') return sendAdmin(ctx, 200, reportBody(report))
    // The first problem's field is the param, as a bad field of a request body would be.
    const first = report.problems[0] ?? ''
    throw gatewayError(REFUSALS[report.outcome], {
      message: `${refusalLead(report.outcome)}; the gateway goes on with the configuration it runs (sha256 ${report.hash}). ${report.problems.join('; ')}`,
      param: /^[\w.-]+(?=:)/.exec(first)?.[0] ?? null,
    })
  })
  router.on('GET', '/admin/config', async (ctx) => {
    ctx.route = 'admin.config'
    deps.authenticateAdmin(ctx.req)
    const running = deps.runtime.current
    sendAdmin(ctx, 200, {
      object: 'config',
      instance: deps.instance,
      file: running.config.source,
      hash: running.hash,
      plans_hash: running.plansHash,
      loaded_at: new Date(running.loadedAt).toISOString(),
    })
  })
}

function refusalLead(outcome: Exclude<ReloadOutcome, 'applied' | 'unchanged'>): string {
  switch (outcome) {
    case 'invalid':
      return 'The configuration file is invalid'
    case 'restart_required':
      return 'The configuration file changes settings that only a restart applies'
    case 'failed':
      return 'The configuration file could not be put in force'
  }
}
