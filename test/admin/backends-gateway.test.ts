// GET /admin/backends, `/metrics` and the capacity on a running gateway: a deployment that
// declares rpm and maxConcurrent is counted by the calls that pass through it, and the
// admin API and the gauges show the same counts (the in-process tests, backends.test.ts,
// cover the refusals and a failing store).
import t from 'tap'
import { BackendList } from '../../src/api/admin.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { request } from '../helpers/http.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate({
    config: (doc) => {
      const models = doc.models as Array<{ name: string; deployments: Array<Record<string, unknown>> }>
      const model = models.find((m) => m.name === MODEL)
      if (model === undefined) throw new Error(`${MODEL} is not in the default config`)
      model.deployments = [{ backend: 'mock', rpm: 1000, maxConcurrent: 8 }]
    },
  })
})
t.teardown(async () => {
  await gw.stop()
})

t.test('calls through a declared deployment show in /admin/backends and /metrics', async (t) => {
  const { key } = await gw.createKey({ tier: 'Standard4000' })
  for (let i = 0; i < 3; i++) {
    const res = await request(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
    })
    t.equal(res.status, 200, res.text.slice(0, 200))
  }
  const res = await request(`${gw.url}/admin/backends`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  t.equal(res.status, 200)
  const list = BackendList.parse(res.json())
  t.equal(list.store, 'memory', 'embedded: counted in this process')
  t.equal(list.state_available, true)
  const deployment = list.data.find((m) => m.name === MODEL)?.deployments[0]
  t.match(deployment, {
    id: `mock/${MODEL}`,
    backend: 'mock',
    upstream_model: MODEL,
    limits: { rpm: 1000, tpm: null, max_concurrent: 8 },
    state: { in_flight: 0, requests: 3, remaining_requests: 997, cooling_down: false },
  })
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  const labels = `deployment="mock/${MODEL}",model="${MODEL}"`
  t.match(metrics, `tollgate_deployment_remaining_requests{${labels}} 997`)
  t.match(metrics, `tollgate_deployment_inflight{${labels}} 0`)
  t.match(metrics, `tollgate_deployment_cooling_down{${labels}} 0`)
  t.match(metrics, `tollgate_deployment_cooldown_seconds{${labels}} 0`)
})
