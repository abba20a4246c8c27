// The commands one connection sends in a turn of the event loop, in one socket write.
//
// Under concurrency many admissions start in the same turn (each request's body read ends in
// its own I/O callback of one poll phase), and each was one write system call: the largest
// single cost of a call in the CPU profile. Corking the connection's socket at the first
// command of a turn and uncorking it at that turn's end (turn-batches.ts flushAtTurnEnd:
// after the turn's batches are sent) sends them with one writev. Not ioredis's
// auto-pipelining: it also sends at the end of the turn, but keeps one pipeline in flight per
// connection, so an admission made while one is out waits for its replies before it leaves;
// on a starved machine that chain missed the limiter's 200 ms deadline
// (test/limits/gateway.test.ts over-admitted in a full run at load 10). Corked, every command
// still goes out at the end of the turn it was made in.
//
// One server (or Sentinel's master) only: on a cluster each node has a socket of its own,
// and the commands are sent as they come.
import type { Writable } from 'node:stream'
import type { Redis } from 'ioredis'
import type { RedisConnection } from './redis-client.ts'
import { flushAtTurnEnd } from '../turn-batches.ts'

const oneServer = (redis: RedisConnection): redis is Redis => !redis.isCluster

/** Call before each command on `redis` that may share the turn's write. */
export function turnWrites(redis: RedisConnection): () => void {
  if (!oneServer(redis)) return () => {}
  let corked: Writable | null = null
  const uncork = (): void => {
    const stream = corked
    corked = null
    stream?.uncork()
  }
  return () => {
    // The socket of the moment: a reconnect replaces it (a stale one is uncorked all the same).
    const stream: Writable | undefined = redis.stream
    if (corked !== null || stream === undefined || !stream.writable) return
    stream.cork()
    corked = stream
    flushAtTurnEnd(uncork)
  }
}

/**
 * Every command on `redis` leaves with the rest of its turn's, in one write: the corked turn
 * above, for each command the connection sends. What ioredis's auto-pipelining does for a
 * connection with no deadline to keep, without the Pipeline it builds per turn and the promise
 * and callback it wraps each command in: those cost more than the write they saved (in the
 * CPU profile the settlements connection's pipelines were about 8 % of a call, the socket
 * write 5 %).
 */
export function corkTurns(redis: Redis): void {
  const cork = turnWrites(redis)
  const send = redis.sendCommand.bind(redis)
  redis.sendCommand = (command, stream) => {
    cork()
    return send(command, stream)
  }
}
