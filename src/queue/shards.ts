// Which shard of the stored queue a key's requests live on (issue #25). On Redis the queue
// is split into `queue.shards` shards, each under a hash tag of its own
// (store/redis-kit.ts queueShardNamespace), so a cluster spreads them over its masters. A
// line is one key's, and every script touches a request together with its line, so a
// key's requests, lines and pending counters all go to one shard: its key id's hash.
//
// A request's id names its shard (`qreq_<16 random>s<shard>`), so reading it by id needs
// no index and stays right when `queue.shards` changes later. An id without one (16
// random characters, as every id was before) is a request of the unsharded layout, kept
// under `{tg}` and still served (redis-store.ts).
import { randomBytes } from 'node:crypto'

/** FNV-1a (32 bits): stable across processes and versions, unlike anything seeded. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/** The shard of a key's requests and lines, of `shards`. */
export function shardOfKey(keyId: string, shards: number): number {
  return fnv1a(keyId) % shards
}

/** A new request id on `shard` (null: an id without a shard, as the embedded store uses). */
export function newRequestId(shard: number | null): string {
  const random = randomBytes(12).toString('base64url')
  return shard === null ? `qreq_${random}` : `qreq_${random}s${shard}`
}

const SHARDED_ID = /^qreq_[\w-]{16}s(\d{1,4})$/

/** The shard an id names; null for an id of the unsharded layout (or not a request id). */
export function shardOfId(id: string): number | null {
  const match = SHARDED_ID.exec(id)
  return match === null ? null : Number(match[1])
}
