// The gauges read at scrape time from what another room hands the metrics: the queue's
// lines (depth and the head's wait, by model) and the RAG gateway's signing key (its planned
// end of life). What they show for a given reading, and that they show nothing without one.
import t from 'tap'
import { createLogger } from '../../src/observability/logger.ts'
import { createMetrics } from '../../src/observability/metrics.ts'
import { createKeyring } from '../../src/jwt/keyring.ts'
import { createSealer } from '../../src/jwt/seal.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'

/** The samples of one metric, as `labels → value`. */
async function samples(metrics: ReturnType<typeof createMetrics>, name: string): Promise<Map<string, number>> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name)
  const values = (metric?.values ?? []) as Array<{ labels: Record<string, string | number>; value: number }>
  return new Map(values.map((v) => [JSON.stringify(v.labels), v.value]))
}

t.test('queue gauges: depth summed per model, the head that waited longest per model', async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  t.same([...(await samples(metrics, 'tollgate_queue_oldest_wait_seconds'))], [], 'no source: no sample')
  const now = Date.now()
  metrics.setQueueSource(async () => [
    { model: 'a', depth: 2, headJoinedAt: now - 30_000 },
    { model: 'a', depth: 1, headJoinedAt: now - 90_000 },
    { model: 'b', depth: 0, headJoinedAt: null },
  ])
  const depth = await samples(metrics, 'tollgate_queue_depth')
  t.equal(depth.get('{"model":"a"}'), 3)
  t.equal(depth.get('{"model":"b"}'), 0)
  const oldest = await samples(metrics, 'tollgate_queue_oldest_wait_seconds')
  t.ok(
    Math.abs((oldest.get('{"model":"a"}') ?? 0) - 90) < 5,
    `the longest wait of a's lines (${oldest.get('{"model":"a"}')})`,
  )
  t.equal(oldest.get('{"model":"b"}'), 0, 'an empty line waits 0')
  metrics.setQueueSource(() => Promise.reject(new Error('store down')))
  t.equal(
    (await samples(metrics, 'tollgate_queue_oldest_wait_seconds')).size,
    2,
    'a failed read keeps the last samples',
  )
})

t.test("the signing-key gauge shows the key that signs now, from the keyring's own record", async (t) => {
  const metrics = createMetrics({ defaultMetrics: false })
  const stores = openEmbeddedStores(':memory:')
  t.teardown(() => stores.close())
  let clock = Date.parse('2030-01-01T00:00:00Z')
  const ring = createKeyring({
    store: stores.signingKeys,
    sealer: createSealer('k'.repeat(32)),
    rotationMs: 86_400_000,
    accessTokenTtlMs: 3_600_000,
    log: createLogger('silent'),
    now: () => clock,
  })
  metrics.setSigningKeySource(() => {
    const key = ring.current()
    return key === null ? null : { kid: key.kid, expiresAt: Date.parse(key.expiresAt) }
  })
  t.equal(
    (await samples(metrics, 'tollgate_jwt_signing_key_expiry_timestamp_seconds')).size,
    0,
    'no key yet: no sample',
  )
  const first = await ring.signer()
  t.equal(ring.current()?.kid, first.kid)
  const firstExpiry =
    (await samples(metrics, 'tollgate_jwt_signing_key_expiry_timestamp_seconds')).get(
      JSON.stringify({ kid: first.kid }),
    ) ?? 0
  t.ok(firstExpiry * 1000 > clock + 86_400_000, 'a day of rotation and more ahead')
  clock += 86_400_000
  const second = await ring.signer()
  t.not(second.kid, first.kid, 'rotated')
  const after = await samples(metrics, 'tollgate_jwt_signing_key_expiry_timestamp_seconds')
  t.equal(after.size, 1, 'only the key that signs now')
  const secondExpiry = after.get(JSON.stringify({ kid: second.kid })) ?? 0
  t.equal(secondExpiry - firstExpiry, 86_400, "the gauge follows the new key's life")
})
