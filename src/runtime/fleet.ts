// `tollgate reload --all`: every instance on the same Redis reloads its configuration file
// and answers with what it runs now. The asking instance publishes one request on the
// fleet's channel (`<prefix>{tg}:cfg:reload`); each instance, the asker included, reloads
// and publishes its report on the asker's own channel (`<prefix>{tg}:cfg:answer:<id>`).
// The asker waits for as many answers as PUBLISH said listeners got the request (on one
// server or Sentinel; a cluster counts only the node it asked, so there it waits the whole
// time), or until the wait is over: an instance that did not answer is one the operator
// should look at. Pub/sub delivers at most once: an instance whose feed was down missed
// it, which shows as a missing answer. Embedded: the one instance reloads.
import { randomBytes } from 'node:crypto'
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import { isCluster, type RedisConnection } from '../store/redis-client.ts'
import { redisNamespace } from '../store/redis-kit.ts'
import { publish, publishesSharded, subscribe } from '../store/redis-subscription.ts'
import type { Reloader, ReloadReport } from './reload.ts'

export interface FleetAnswers {
  /** How many instances the request reached, when Redis can say (null on a cluster). */
  readonly asked: number | null
  /** The answers that came within the wait, in their order of arrival. */
  readonly answers: readonly ReloadReport[]
}

export interface FleetReload {
  /** Asks every instance to reload; resolves with the answers that came within `waitMs`. */
  reloadAll(waitMs: number): Promise<FleetAnswers>
  /** Waits until requests can arrive (bounded); true when they can. */
  ready(timeoutMs: number): Promise<boolean>
  close(): Promise<void>
}

/** Embedded: the fleet is this one instance. */
export function localFleet(reloader: Reloader): FleetReload {
  return {
    async reloadAll() {
      return { asked: 1, answers: [await reloader.reload()] }
    },
    ready: async () => true,
    async close() {},
  }
}

export interface RedisFleetOptions {
  /** Publishes (the store's connection). */
  readonly publisher: RedisConnection
  readonly redis: RedisTarget
  readonly keyPrefix: string
  readonly instance: string
  readonly log: Logger
}

export function redisFleet(options: RedisFleetOptions, reloader: Reloader): FleetReload {
  const base = `${redisNamespace(options.keyPrefix)}cfg:`
  const requests = `${base}reload`
  const answerChannel = (instance: string): string => `${base}answer:${instance}`
  const mine = answerChannel(options.instance)
  const waiting = new Map<string, (report: ReloadReport) => void>()
  const { log, publisher } = options

  const answer = (message: string): void => {
    const request = parse(message) as { id?: unknown; from?: unknown } | null
    if (typeof request?.id !== 'string' || typeof request.from !== 'string') return
    const { id, from } = request
    reloader
      .reload()
      .then((report) => publish(publisher, answerChannel(from), JSON.stringify({ id, report }), { sharded: true }))
      .catch((error: unknown) =>
        log.warn({ err: (error as Error).message }, 'fleet reload: could not reload or answer'),
      )
  }
  const collect = (message: string): void => {
    const got = parse(message) as { id?: unknown; report?: ReloadReport } | null
    if (typeof got?.id !== 'string' || got.report === undefined) return
    waiting.get(got.id)?.(got.report)
  }
  const feed = subscribe({
    redis: options.redis,
    commandTimeoutMs: 5000,
    name: 'tollgate-config-reload',
    channels: [requests, mine],
    sharded: true,
    onMessage: (channel, message) => (channel === requests ? answer(message) : collect(message)),
    onError: (error) => log.debug({ err: error.message }, 'fleet reload redis error'),
    onSubscribeFailed: (error) => log.warn({ err: error.message }, 'fleet reload: cannot subscribe; reconnecting'),
  })

  return {
    async reloadAll(waitMs) {
      const id = randomBytes(9).toString('base64url')
      const answers: ReloadReport[] = []
      let asked: number | null = null
      let finish = (): void => {}
      const done = new Promise<void>((resolve) => {
        finish = resolve
      })
      const enough = (): boolean => asked !== null && answers.length >= asked
      waiting.set(id, (report) => {
        answers.push(report)
        if (enough()) finish()
      })
      const timer = setTimeout(finish, waitMs)
      try {
        const reached = await publish(publisher, requests, JSON.stringify({ id, from: options.instance }), {
          sharded: true,
        })
        // A classic PUBLISH on a cluster counts only the subscribers of the node that took it.
        asked = isCluster(publisher) && !publishesSharded(publisher) ? null : reached
        if (enough()) finish()
        await done
      } finally {
        clearTimeout(timer)
        waiting.delete(id)
      }
      return { asked, answers: [...answers] }
    },
    ready: (timeoutMs) => feed.ready(timeoutMs),
    close: () => feed.close(),
  }
}

function parse(message: string): unknown {
  try {
    return JSON.parse(message)
  } catch {
    return null
  }
}
