// The drop-in admission strategy: the call joins the line of its key and model, and only
// when it is at the head does it ask the limiter, as /v2 would. Over the limit, it waits
// for the limiter's retry-after (or a wake-up: capacity given back, or the sweep's nudge)
// and asks again; behind others, it waits to be told its turn has come. Nothing polls.
// A refusal no wait can cure (larger than the limit, quota spent) is answered at once,
// before the call joins. When every deployment of the model is full or cooling down, the
// call goes back to the head of its line and waits the same way, for the time the first
// deployment frees up (or a wake-up); that is not an upstream retry, and it is not counted
// against queue.upstreamRetries. The wait ends with queue_timeout after queue.maxWaitMs, and a
// client that leaves takes its place out of the line at once: it was never sent upstream
// and nothing was charged.
import { randomBytes } from 'node:crypto'
import { gatewayError, type GatewayError } from '../errors.ts'
import type { AdmissionStrategy } from '../inference/corridor.ts'
import type { Admission, AdmissionRequest, Limiter, RateLimitHeaders } from '../limits/port.ts'
import type { Metrics } from '../observability/metrics.ts'
import { seatOf, type CapacityTurn } from './capacity-line.ts'
import type { Coordinator } from './coordinator.ts'
import type { Ticket } from './ports.ts'
import { backoffMs, retryAfterMs, upstreamRetryable, withGiveBack } from './retry.ts'
import { lineOf } from './tickets.ts'
import { deadlineOf, deadlineRefusal } from './deadline.ts'
import type { WaitPredictor } from './wait-predictor.ts'
import { bandOf } from '../priority/classes.ts'

export interface WaiterOptions {
  readonly coordinator: Coordinator
  readonly limiter: Limiter
  readonly metrics: Metrics
  readonly maxWaitMs: number
  readonly upstreamRetries: number
  readonly retryBackoffMs: number
  /** Aborted when the gateway shuts down: calls still waiting get 503 and may go elsewhere. */
  readonly shutdown: AbortSignal
  /** Predicts a call's wait when it joins, for its deadline (deadline.ts); absent: none is predicted. */
  readonly predictor?: WaitPredictor
}

/** A strategy for one call; `signal` fires when its client leaves. */
export function waitInLine(options: WaiterOptions, signal: AbortSignal): AdmissionStrategy {
  const { coordinator: c, limiter, metrics } = options
  const { store } = c
  let ticket: Ticket | undefined
  let joinedAt = 0
  let deadline = 0
  /** Its deadline (ms from joining) and the wait predicted when it joined. */
  let allowedMs = 0
  let predictedMs = 0
  /** Predicted and let wait: its wait, however it ends, teaches its line's pace (wait-predictor.ts). */
  let waiting: { end(aheadAtEnd?: number): void } | undefined
  let classOf = 'default'
  /** How many were ahead of it when it last looked (0 once at the head). */
  let aheadNow = 0
  let joinState: RateLimitHeaders = {}
  /** The call as admission reserves it (a learned output reservation): what its wait is predicted in. */
  let reserved: AdmissionRequest | undefined
  /** Every deployment is full until then (epoch ms): the next admission waits for it first, in the capacity line. */
  let capacityAt: number | null = null
  let capacityOf: readonly string[] = []
  /** Its turn in the capacity line, held from its try until a deployment is picked. */
  let turn: CapacityTurn | null = null

  const timeout = (model: string): GatewayError => {
    const waited = ((Date.now() - joinedAt) / 1000).toFixed(1)
    return gatewayError('queue_timeout', {
      message:
        `The request waited ${waited} s in line for ${model === '*' ? 'its endpoint' : model} without capacity becoming free ` +
        `(the queue waits at most ${options.maxWaitMs} ms). It was not sent upstream and nothing was charged.`,
      headers: { 'x-should-retry': 'false' },
    })
  }

  return {
    retryUpstream: (status, attempt) => upstreamRetryable(status) && attempt < options.upstreamRetries,

    waitForCapacity(retryAt, deployments) {
      capacityAt = retryAt
      capacityOf = deployments
      return true
    },

    picked() {
      turn?.pass(true)
      turn = null
      // Its wait ends with a deployment (a first admission may still have waited for one after it).
      if (waiting !== undefined) {
        const waitedMs = Date.now() - joinedAt
        if (predictedMs > 0) metrics.queueWaitPredictionRatio.observe({ class: classOf }, waitedMs / predictedMs)
        waiting.end(0)
        waiting = undefined
      }
    },

    async admit(request: AdmissionRequest, attempt: number): Promise<Admission> {
      const line = lineOf(request.keyId, request.model)
      const band = bandOf(request.serviceClass)
      if (ticket === undefined) {
        try {
          // Where its key's counters stand: what its wait is predicted from (deadline.ts).
          joinState = (await limiter.check?.(request)) ?? {}
          if (options.predictor !== undefined) reserved = await limiter.asReserved?.(request)
        } catch (error) {
          metrics.queueRequests.inc({ mode: 'dropin', outcome: 'refused' })
          throw error
        }
        joinedAt = Date.now()
        allowedMs = deadlineOf(request, options.maxWaitMs)
        deadline = joinedAt + allowedMs
        ticket = { kind: 'call', instance: c.instance, id: randomBytes(9).toString('base64url'), joinedAt }
      }
      const me = ticket
      let woken = false
      let wake: (() => void) | null = null
      const unregister = c.onTurn(me.id, () => {
        woken = true
        wake?.()
      })

      /** Until woken or `ms` passed (undefined: until woken); throws when the wait must end. */
      const pause = (ms: number | undefined): Promise<void> =>
        new Promise<void>((resolve, reject) => {
          if (woken) return resolve()
          if (signal.aborted) return reject(gatewayError('client_closed'))
          if (options.shutdown.aborted) return reject(gatewayError('shutting_down'))
          const left = deadline - Date.now()
          if (left <= 0) return reject(timeout(request.model))
          const byDeadline = ms === undefined || ms >= left
          const finish = (settle: () => void): void => {
            clearTimeout(timer)
            signal.removeEventListener('abort', onLeave)
            options.shutdown.removeEventListener('abort', onShutdown)
            wake = null
            settle()
          }
          const timer = setTimeout(
            () => finish(byDeadline ? () => reject(timeout(request.model)) : resolve),
            byDeadline ? left : ms,
          )
          const onLeave = (): void => finish(() => reject(gatewayError('client_closed')))
          const onShutdown = (): void => finish(() => reject(gatewayError('shutting_down')))
          signal.addEventListener('abort', onLeave, { once: true })
          options.shutdown.addEventListener('abort', onShutdown, { once: true })
          wake = () => finish(resolve)
        })

      /** Its turn in the capacity line (kept at its head when refused again); the wait ends as pause() would. */
      const capacityTurn = async (at: number): Promise<void> => {
        const ends = AbortSignal.any([
          signal,
          options.shutdown,
          AbortSignal.timeout(Math.max(0, deadline - Date.now())),
        ])
        const mine = turn ?? (await c.capacityLine.enter(capacityOf, at, ends, seatOf(request)))
        if (mine !== null && (mine !== turn || (await mine.again(at)))) {
          turn = mine
          return
        }
        turn = null
        if (signal.aborted) throw gatewayError('client_closed')
        if (options.shutdown.aborted) throw gatewayError('shutting_down')
        throw timeout(request.model)
      }

      let inLine = false
      try {
        // Put back after an upstream failure (backing off) or for want of a deployment with
        // room (until the first frees up): it takes its place back at the head of its line.
        let upstreamAt = capacityAt
        capacityAt = null
        const joining = attempt === 0 && upstreamAt === null
        const ahead = await store.join(line, me, joining ? 'back' : 'front', band)
        inLine = true
        if (joining && options.predictor !== undefined) {
          // Its deadline against the line ahead of it and its class's pace there: refused now rather than timed out later.
          aheadNow = ahead
          const predicted = options.predictor.predict(line, band, ahead, reserved ?? request, joinState)
          predictedMs = predicted.waitMs
          // Held against the wait it would likely not pass, so a call let wait mostly makes it.
          if (predicted.likelyMs > allowedMs) throw deadlineRefusal(predicted, allowedMs, ahead, options.maxWaitMs)
          classOf = request.serviceClass ?? 'default'
          waiting = options.predictor.waiting(line, band, ahead, allowedMs)
        }
        if (upstreamAt === null && attempt > 0) await pause(backoffMs(options.retryBackoffMs, attempt))
        for (;;) {
          woken = false
          const ahead = await store.position(line, me)
          aheadNow = ahead ?? aheadNow
          if (ahead === null) {
            // Swept out (this gateway missed its heartbeats): take the place back.
            await store.join(line, me, 'front')
            continue
          }
          if (ahead > 0) {
            await pause(undefined)
            continue
          }
          // Only the head of its key's line waits for a deployment: a call that waited there
          // while behind another of its key would wait on a call that waits on it (issue #36).
          // With fair shares, a first try joins the capacity line others wait in (capacity-line.ts crowded).
          const crowd =
            upstreamAt === null && turn === null && attempt === 0 ? c.capacityLine.crowded(request.model) : undefined
          if (crowd !== undefined) {
            capacityOf = crowd
            upstreamAt = Date.now()
          }
          if (upstreamAt !== null) {
            await capacityTurn(upstreamAt)
            upstreamAt = null
          }
          let admission: Admission
          try {
            admission = await limiter.admit(request)
          } catch (error) {
            const wait = retryAfterMs(error)
            if (wait === undefined) throw error
            // At the head, the limiter's own retry-after is the prediction.
            if (options.predictor !== undefined && Date.now() + wait > deadline)
              throw deadlineRefusal({ waitMs: wait, likelyMs: wait }, allowedMs, 0, options.maxWaitMs)
            // Its key's own limit: the capacity line's turn goes on to the next key meanwhile.
            if (turn !== null) {
              turn.pass(false)
              turn = null
              upstreamAt = Date.now() + wait
            }
            await pause(wait)
            continue
          }
          inLine = false
          void c.handOver(line, await store.leave(line, me).catch(() => null))
          const waitedMs = Date.now() - joinedAt
          if (attempt === 0) {
            metrics.queueWait.observe({ mode: 'dropin' }, waitedMs / 1000)
            metrics.queueRequests.inc({ mode: 'dropin', outcome: 'admitted' })
            const cls = request.serviceClass ?? 'default'
            metrics.queueClassWait.observe({ class: cls }, waitedMs / 1000)
          }
          return withGiveBack(admission, request, { 'x-queue-wait-ms': String(waitedMs) }, () => void c.released(line))
        }
      } catch (error) {
        turn?.pass(false)
        turn = null
        const code = (error as { errorName?: string }).errorName
        const outcome =
          code === 'queue_timeout'
            ? 'timeout'
            : code === 'queue_deadline'
              ? 'deadline'
              : code === 'client_closed'
                ? 'left'
                : code === 'shutting_down'
                  ? 'shutdown'
                  : 'refused'
        // Given up after waiting (not at the door, not by a shutdown): the pace it saw counts too.
        const paced = outcome === 'timeout' || outcome === 'left' || outcome === 'deadline'
        // Where it stood when it gave up (only a line's head is told its place): its pace's sample.
        if (paced && inLine && waiting !== undefined && aheadNow > 0)
          aheadNow = (await store.position(line, me).catch(() => null)) ?? aheadNow
        if (inLine) void c.handOver(line, await store.leave(line, me).catch(() => null))
        metrics.queueRequests.inc({ mode: 'dropin', outcome })
        waiting?.end(paced ? aheadNow : undefined)
        throw error
      } finally {
        unregister()
      }
    },
  }
}
