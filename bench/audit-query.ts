// The audit log's reads as it grows: a first page unfiltered, a page of a filter that
// matches one record in a thousand, and a time-bounded page, on both stores. Records are
// written at human pace in real life; this fills a log with N of them to see what a read
// costs at that size. Run: node bench/audit-query.ts [N] (Redis at REDIS_URL).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { openEmbeddedAuditStore } from '../src/audit/embedded-store.ts'
import type { AuditStore } from '../src/audit/port.ts'
import type { NewAuditEntry } from '../src/audit/record.ts'
import { createRedisAuditStore } from '../src/audit/redis-store.ts'
import { createRedisClient } from '../src/store/redis-client.ts'

const N = Number(process.argv[2] ?? 20_000)
const T0 = Date.UTC(2026, 0, 1)

const entry = (i: number): NewAuditEntry => ({
  at: T0 + i * 60_000,
  actor: { type: 'admin', id: i % 1000 === 0 ? 'admin:rare' : 'admin:common' },
  via: 'api',
  action: i % 2 === 0 ? 'key.update' : 'key.rotate',
  objectType: 'key',
  objectId: `key_${i % 500}`,
  before: { id: `key_${i % 500}`, name: 'a name', tier: 'Basic', models: ['gpt-4o'], status: 'active' },
  after: { id: `key_${i % 500}`, name: 'another name', tier: 'Pro', models: ['gpt-4o'], status: 'active' },
  address: '10.0.0.7',
  requestId: `req_${i}`,
})

async function median(fn: () => Promise<unknown>, runs = 7): Promise<number> {
  const times: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await fn()
    times.push(performance.now() - t)
  }
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)] ?? 0
}

async function measure(name: string, store: AuditStore): Promise<void> {
  const t = performance.now()
  for (let i = 0; i < N; i += 100) await Promise.all(Array.from({ length: 100 }, (_, j) => store.append(entry(i + j))))
  const fill = performance.now() - t
  const first = await median(() => store.query({ limit: 20 }))
  const rare = await median(() => store.query({ limit: 20, actor: 'admin:rare' }))
  const day = await median(() => store.query({ limit: 20, since: T0 + (N - 1440) * 60_000 }))
  console.log(
    `${name}: ${N} records appended in ${(fill / 1000).toFixed(1)} s; page of 20: ${first.toFixed(1)} ms; 1-in-1000 filter: ${rare.toFixed(1)} ms; last day: ${day.toFixed(1)} ms`,
  )
}

const dir = mkdtempSync(join(tmpdir(), 'tollgate-audit-bench-'))
const embedded = openEmbeddedAuditStore(dir)
await measure('embedded', embedded)
await embedded.close()
rmSync(dir, { recursive: true, force: true })

const redis = createRedisClient(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  commandTimeoutMs: 10_000,
  name: 'audit-bench',
})
const prefix = `tgbench:audit:${Date.now()}:`
await measure('redis', createRedisAuditStore(redis, prefix))
await redis.del(`${prefix}{tg}:audit`)
redis.disconnect()
