// A gateway killed mid-batch (SIGKILL: no drain) and started again on the same state, on
// the embedded store and on Redis: the batch goes on where it was, every line's result is
// in the output file once, and the key is charged for each line once: no line twice, not
// even one killed after its charge and before its result was recorded (queue/charge-once.ts).
//
// That window is milliseconds wide; the test holds it open and kills the gateway inside it.
// Embedded: the test holds queue.db's write lock, so no result can be recorded while lines
// go on being charged. Redis: the gateway reaches Redis through a proxy that holds back the
// first result (the queue's FINISH script) and what its connection sends after it.
import { mkdtempSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import type { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { QUEUE_DATABASE_FILE } from '../../src/queue/embedded-store.ts'
import { FINISH } from '../../src/queue/redis-store.ts'
import { DATABASE_FILE } from '../../src/store/embedded.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { batchOf, untilBatch } from '../helpers/batches.ts'
import { startHoldingProxy } from '../helpers/holding-proxy.ts'
import { pollUntil } from '../helpers/poll.ts'
import { keysUnder, REDIS_URL } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'gpt-oss-120b'
const N = 120

/** Holds the window between a line's charge and its result open, until the kill. */
interface Window {
  /** The first gateway's options (Redis: through the proxy). */
  readonly first: StartOptions
  /** Resolves once at least one line is charged whose result cannot be recorded. */
  hold(keyId: string): Promise<void>
  /** After the kill. */
  release(): Promise<void>
}

/** A key's usage and budgets as the admin API shows them. */
async function keyUsage(gw: RunningTollgate, keyId: string) {
  const res = await fetch(`${gw.url}/admin/keys/${keyId}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  return (await res.json()) as {
    by_model: Array<{ model: string; requests: number; input_tokens: number; output_tokens: number; cost: number }>
    budgets: Array<{ scope: string; spent: number; reserved: number }>
  }
}

async function suite(t: Test, base: StartOptions, window: (options: StartOptions) => Promise<Window>): Promise<void> {
  const options: StartOptions = {
    ...base,
    // Lines that take a while (32 tokens at 200 a second): the kill finds the batch halfway.
    config: (doc) => {
      base.config?.(doc)
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 200
    },
    dataDir: join(mkdtempSync(join(tmpdir(), 'tollgate-batch-restart-')), 'data'),
    adminToken: `adm_${randomBytes(16).toString('hex')}`,
  }
  const held = await window(options)
  const first = await startTollgate(held.first)
  const key = await first.createKey({ tier: 'Standard4000' })
  const lines = Array.from({ length: N }, (_, i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/chat/completions',
      body: { model: MODEL, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 32 },
    }),
  )
  const client = sdkClient(first, key.key)
  const batch = await batchOf(client, lines)
  const before = await untilBatch(client, batch.id, (b) => (b.request_counts?.completed ?? 0) >= 10, {
    ms: 120_000,
    stepMs: 50,
  })
  await held.hold(key.id)
  await first.stop('SIGKILL')
  await held.release()
  t.ok((before.request_counts?.completed ?? 0) < N, `killed with ${before.request_counts?.completed} of ${N} done`)

  const second = await startTollgate(options)
  t.teardown(() => second.stop())
  const again = sdkClient(second, key.key)
  const done = await untilBatch(again, batch.id, (b) => b.status === 'completed', { ms: 120_000, stepMs: 50 })
  t.same(done.request_counts, { total: N, completed: N, failed: 0 }, 'no line lost')
  const text = await (await again.files.content(done.output_file_id ?? '')).text()
  const out = text
    .split('\n')
    .filter((l) => l !== '')
    .map(
      (l) =>
        JSON.parse(l) as {
          custom_id: string
          response: { body: { usage: { prompt_tokens: number; completion_tokens: number } } }
        },
    )
  t.equal(new Set(out.map((l) => l.custom_id)).size, N, 'each line once in the output')
  t.equal(out.length, N)
  const input = out.reduce((s, l) => s + l.response.body.usage.prompt_tokens, 0)
  const output = out.reduce((s, l) => s + l.response.body.usage.completion_tokens, 0)
  const usage = await keyUsage(second, key.id)
  const charged = usage.by_model.find((m) => m.model === MODEL)
  t.equal(charged?.requests, N, `each line charged once: ${charged?.requests} charges for ${N} lines`)
  t.match(charged, { input_tokens: input, output_tokens: output }, 'the tokens of the results, once')
  // The key's budget (its tier's) is never spent more than the usage says. It may be spent
  // less (docs/budgets.md): embedded, a crash loses the last seconds of spend (limits.json);
  // on Redis, the connection held back is an outage to the limiter, whose calls meanwhile
  // are metered but not charged to budgets.
  const budget = usage.budgets.find((b) => b.scope === 'key')
  t.ok(budget !== undefined, 'the key has a budget')
  t.ok((budget?.spent ?? 0) <= (charged?.cost ?? 0) + 1e-9, `spent ${budget?.spent} of a cost of ${charged?.cost}`)
  t.equal(budget?.reserved, 0, 'nothing left held')
}

/** Embedded: queue.db's write lock held by the test; charges go on in tollgate.db. */
async function embeddedWindow(options: StartOptions): Promise<Window> {
  const dataDir = options.dataDir ?? ''
  let lock: DatabaseSync | undefined
  return {
    first: options,
    async hold(keyId) {
      lock = new DatabaseSync(join(dataDir, QUEUE_DATABASE_FILE), { timeout: 5000 })
      lock.exec('BEGIN IMMEDIATE')
      const recorded = Number(
        lock
          .prepare(`SELECT COUNT(*) AS n FROM requests WHERE key_id = ? AND status NOT IN ('queued', 'in_progress')`)
          .get(keyId)?.n ?? 0,
      )
      const usage = new DatabaseSync(join(dataDir, DATABASE_FILE), { readOnly: true, timeout: 5000 })
      const { met } = await pollUntil(
        async () => Number(usage.prepare('SELECT TOTAL(requests) AS n FROM usage WHERE key_id = ?').get(keyId)?.n ?? 0),
        (metered) => metered > recorded,
        6000,
        5,
      )
      usage.close()
      if (!met) throw new Error('no line was charged while results could not be recorded')
    },
    async release() {
      lock?.exec('ROLLBACK')
      lock?.close()
    },
  }
}

/** Redis: the first gateway through a proxy that holds back the first FINISH. */
function redisWindow(prefix: string) {
  return async (options: StartOptions): Promise<Window> => {
    const target = new URL(REDIS_URL)
    const proxy = await startHoldingProxy(target.hostname, Number(target.port || 6379))
    const admin: Redis = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'restart-test' })
    /** Charges of the key, read from its usage rows. */
    const metered = async (keyId: string): Promise<number> => {
      const rows = (await keysUnder(admin, prefix)).filter((k) => /usage:\d{4}-\d\d-\d\d:/.test(k) && k.includes(keyId))
      const counts = await Promise.all(rows.map((k) => admin.hget(k, 'requests')))
      return counts.reduce((s, n) => s + Number(n ?? 0), 0)
    }
    return {
      first: { ...options, env: { ...options.env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` } },
      async hold(keyId) {
        proxy.arm(FINISH.sha)
        const m0 = await metered(keyId)
        await proxy.held
        // A line charged since it was armed: its result comes after the first held, so it is held too.
        const { met } = await pollUntil(
          () => metered(keyId),
          (m) => m > m0,
          1500,
          20,
        )
        if (!met) throw new Error('no line was charged while its result was held back')
      },
      async release() {
        await proxy.close()
        admin.disconnect()
      },
    }
  }
}

t.test('embedded store', (t) => suite(t, {}, embeddedWindow))
t.test('redis store', (t) => {
  const prefix = `tgtest-batchrs-${randomBytes(4).toString('hex')}:`
  return suite(t, onSharedRedis(prefix), redisWindow(prefix))
})
