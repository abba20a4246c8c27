// Messages between gateways about the queue. A drop-in call waits on the connection of the
// gateway that received it, so when its turn comes (the call ahead of it was admitted on
// another gateway) that gateway is told; and a request cancelled through one gateway may
// be running on another, which is told to abort it.
//
// With Redis: pub/sub on a connection of its own (store/redis-subscription.ts). Wake-ups go to the channel of the one
// gateway holding the call (`<prefix>{tg}:q:ev:<instance>`), cancels to everyone
// (`<prefix>{tg}:q:ev:cancel`). A message lost while a connection is down is made up for
// by the sweep (service.ts), which nudges every head. Room on a deployment comes on the
// capacity store's own channel (capacity/redis.ts publishes it from its release script,
// only when a call was refused there); a lost one costs the waiter the time it was named. A
// deployment's first lesson on an instance comes on its learned channel; a lost one costs
// the other instances their own first refusal, as before there was one.
// Embedded: calls in this process (the capacity's own onRoom, wired in service.ts).
import type { RedisTarget } from '../config/redis-target.ts'
import type { Logger } from '../observability/logger.ts'
import type { RedisConnection } from '../store/redis-client.ts'
import { redisNamespace } from '../store/redis-kit.ts'
import { subscribe } from '../store/redis-subscription.ts'
import { capacityLearnedChannel, capacityRoomChannel } from '../capacity/redis.ts'

export interface QueueSignals {
  /** Tells gateway `instance` that a call it holds is at the head of its line (`message` says which). */
  wake(instance: string, message: string): Promise<void>
  /** Tells every gateway to abort the stored request `id` if it runs it. */
  cancel(id: string): Promise<void>
  /** Waits until messages can arrive (bounded); true when they can. */
  ready(timeoutMs: number): Promise<boolean>
  close(): Promise<void>
}

export interface SignalHandlers {
  onWake(message: string): void
  onCancel(id: string): void
  /** Room may have come back on a deployment a call here waits for (capacity-line.ts). */
  onRoom(deploymentId: string): void
  /** Another instance learned a limit of a deployment: capacity asks the store about it from now on. */
  onLearned(deploymentId: string): void
}

export function localSignals(handlers: SignalHandlers): QueueSignals {
  return {
    async wake(_instance, message) {
      handlers.onWake(message)
    },
    async cancel(id) {
      handlers.onCancel(id)
    },
    async ready() {
      return true
    },
    async close() {},
  }
}

export interface RedisSignalsOptions {
  /** Publishes (a shared client of the queue store). */
  readonly publisher: RedisConnection
  /** Where the subscriber connects (any topology: on a cluster, PUBLISH reaches every node). */
  readonly redis: RedisTarget
  readonly keyPrefix: string
  readonly instance: string
  readonly log: Logger
}

export function redisSignals(options: RedisSignalsOptions, handlers: SignalHandlers): QueueSignals {
  const base = `${redisNamespace(options.keyPrefix)}q:ev:`
  const mine = `${base}${options.instance}`
  const cancels = `${base}cancel`
  const room = capacityRoomChannel(options.keyPrefix)
  const learned = capacityLearnedChannel(options.keyPrefix)
  const feed = subscribe({
    redis: options.redis,
    commandTimeoutMs: 5000,
    name: 'tollgate-queue-events',
    channels: [mine, cancels, room, learned],
    onMessage: (channel, message) => {
      if (channel === mine) handlers.onWake(message)
      else if (channel === room) handlers.onRoom(message)
      else if (channel === learned) handlers.onLearned(message)
      else handlers.onCancel(message)
    },
    onError: (error) => options.log.debug({ err: error.message }, 'queue events redis error'),
    onSubscribeFailed: (error) =>
      options.log.warn({ err: error.message }, 'queue events: cannot subscribe; reconnecting'),
  })

  return {
    async wake(instance, message) {
      await options.publisher.publish(`${base}${instance}`, message)
    },
    async cancel(id) {
      await options.publisher.publish(cancels, id)
    },
    ready: (timeoutMs) => feed.ready(timeoutMs),
    close: () => feed.close(),
  }
}
