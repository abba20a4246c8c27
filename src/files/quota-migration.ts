// Issue #25 moved each key's file quota from `{tg}` to the key's own slot
// (redis-quota-store.ts). The holds need nothing: they are uploads in flight, and lapse in
// minutes. The files counted would be lost, though, and a key could then keep more than its
// caps. So a gateway that starts carries them over: each old file is added to its key's new
// place with the very script that counts an upload (HSETNX: a file counted there already is
// not counted again), then removed from the old place. Several instances starting at once,
// or a start cut off halfway, move each file once; a second run finds nothing left. The
// old totals are only dropped: the new ones are made of the files moved.
//
// During a rolling upgrade a gateway still on the old layout may count a file there after
// this ran; the next start of a gateway carries it over (until then the key's count on the
// new layout misses it). A file deleted meanwhile is given back in both places.
import type { Logger } from '../observability/logger.ts'
import { isCluster, type RedisConnection } from '../store/redis-client.ts'
import { runScript } from '../store/redis-kit.ts'
import { COMMIT, fileQuotaKeys } from './redis-quota-store.ts'

/** A SCAN pattern matching `literal` and anything after it. */
function startingWith(literal: string): string {
  return `${literal.replace(/[*?[\]\\]/g, (c) => `\\${c}`)}*`
}

/** Carries the files counted in the `{tg}` layout over to their keys' slots; answers how many moved. */
export async function migrateFileQuota(redis: RedisConnection, prefix: string, log: Logger): Promise<number> {
  const k = fileQuotaKeys(prefix)
  const [filesOf, totalOf] = [`${k.old.base}files:`, `${k.old.base}total:`]
  const nodes = isCluster(redis) ? redis.nodes('master') : [redis]
  let moved = 0
  for (const node of nodes) {
    let cursor = '0'
    do {
      // Every old key but the index of files (`of:`), which is where it was.
      const [next, batch] = await node.scan(cursor, 'MATCH', startingWith(k.old.base), 'COUNT', 1000)
      cursor = next
      for (const from of batch) {
        if (from.startsWith(filesOf)) {
          const keyId = decodeURIComponent(from.slice(filesOf.length))
          for (const [fileId, bytes] of Object.entries(await redis.hgetall(from))) {
            await runScript(redis, COMMIT, [k.files(keyId), k.total(keyId), k.holds(keyId)], ['', fileId, bytes])
            // The instance whose HDEL takes it counts it (HSETNX made the count itself once).
            if ((await redis.hdel(from, fileId)) === 1) moved++
          }
        }
        const keyId = from.startsWith(filesOf)
          ? from.slice(filesOf.length)
          : from.startsWith(totalOf)
            ? from.slice(totalOf.length)
            : null
        // A total goes with its last file (a gateway of the old layout may add one again: the next start moves it).
        if (keyId !== null && (await redis.hlen(`${filesOf}${keyId}`)) === 0) await redis.del(`${totalOf}${keyId}`)
      }
    } while (cursor !== '0')
  }
  if (moved > 0) log.info({ moved }, "file quota: carried the files counted under {tg} over to their keys' slots")
  return moved
}
