// Dashboards proven on data (issue #26): a real Prometheus (Debian's package) scrapes a
// gateway every second while it serves what an operator's gateway serves: calls that
// succeed, stream, hit their key's limit (429), fail upstream and fail over, wait in a
// /queue line (drop-in, one client leaving, one stored request), reach the RAG services,
// and go to deployments with declared capacity, one of which refuses. Then every PromQL
// target of every panel of every dashboard under grafana/ is asked of Prometheus over the
// traffic's span (a range query, as Grafana asks) and must return a series with a value.
// The shipped alerting rules are loaded too: each must evaluate without error.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import OpenAI from 'openai'
import t, { type Test } from 'tap'
import { stringify } from 'yaml'
import { closedPort, startTollgate } from '../helpers/gateway.ts'
import { panelQueries, readDashboard, substitute } from '../helpers/dashboards.ts'
import { counterSum } from '../helpers/metrics.ts'
import { pollUntil } from '../helpers/poll.ts'
import { startQuotaUpstream } from '../helpers/quota-upstream.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { cachedPlans } from '../cache/helpers.ts'

const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus'
const CHAT = 'Mistral-Small-24B-Instruct-2501'
const FLAKY = 'flaky-model'
const CAPACITY = 'capacity-model'
const DEAD = 'dead-model'

interface PromResult {
  readonly metric: Record<string, string>
  readonly values?: ReadonlyArray<[number, string]>
  readonly value?: [number, string]
}

/** A Prometheus on loopback scraping `targets` every second, with the shipped alerting rules. */
async function startPrometheus(t: Test, targets: readonly string[]): Promise<{ api: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'tg-dash-'))
  writeFileSync(
    join(dir, 'prometheus.yml'),
    stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: [resolve('config/alerts.yml')],
      scrape_configs: [{ job_name: 'tollgate', static_configs: [{ targets }] }],
    }),
  )
  const port = await closedPort()
  const prom = spawn(
    PROMETHEUS,
    [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ],
    { stdio: 'ignore' },
  )
  t.teardown(() => {
    prom.kill('SIGKILL')
  })
  return { api: `http://127.0.0.1:${port}/api/v1` }
}

async function promGet<T>(url: string): Promise<T | null> {
  try {
    const res = await fetch(url)
    const body = (await res.json()) as { status: string; data: T; error?: string }
    if (body.status !== 'success') throw new Error(`${url}: ${body.error ?? res.status}`)
    return body.data
  } catch (err) {
    // Prometheus still starting: no answer yet. A query it refuses is an error worth showing.
    if (err instanceof Error && err.message.includes(': ')) throw err
    return null
  }
}

/** Waits until Prometheus's targets API says every target was scraped, up, after `since` (epoch ms). */
async function scrapedSince(api: string, since: number): Promise<boolean> {
  const polled = await pollUntil(
    async () =>
      (await promGet<{ activeTargets: Array<{ health: string; lastScrape: string }> }>(`${api}/targets`))
        ?.activeTargets ?? [],
    (targets) => targets.length > 0 && targets.every((x) => x.health === 'up' && Date.parse(x.lastScrape) > since),
    200,
    100,
  )
  return polled.met
}

/** Whether a range or instant result holds at least one series with a real (not NaN) value. */
const hasData = (result: readonly PromResult[]): boolean =>
  result.some((r) => [...(r.values ?? []), ...(r.value ? [r.value] : [])].some(([, v]) => Number.isFinite(Number(v))))

t.test('every panel of every dashboard shows data after a real mix of traffic', async (t) => {
  const found = spawnSync(PROMETHEUS, ['--version'], { stdio: 'ignore' })
  // CI installs Prometheus (Debian package `prometheus`); without it this test fails, it never skips.
  t.equal(found.status, 0, `${PROMETHEUS} is installed`, {
    howToFix: 'apt-get install prometheus, or set PROMETHEUS_BIN. bash .ci/run installs it.',
  })
  if (found.status !== 0) return

  // Two deployments with capacity: one declares its limits (the capacity row's figures),
  // the other is an Ollama whose queue is full (a refusal, a cooldown, a move).
  const roomy = await startQuotaUpstream({ rpm: 100_000, latencyMs: 20 })
  t.teardown(() => roomy.close())
  const full = await startQuotaUpstream({ ollamaFull: true })
  t.teardown(() => full.close())
  const dead = await closedPort()
  const started = Date.now() / 1000
  const gw = await startTollgate({
    config: (doc) => {
      // Short windows: a key with rpm 1 waits seconds in a /queue line, not a minute.
      ;(doc.limits as Record<string, unknown>).windowMs = 3000
      // The semantic cache on (only temperature-0 calls are looked up: the response cache's).
      doc.plans = cachedPlans({ semantic: { embeddingModel: 'jina-embeddings-v2-base-de', threshold: 0.9 } })
      Object.assign(doc.backends as object, {
        down: { type: 'openai', baseUrl: `http://127.0.0.1:${dead}/v1`, connectTimeoutMs: 500 },
        roomy: { type: 'openai', baseUrl: roomy.url },
        full: { type: 'openai', baseUrl: full.url },
      })
      ;(doc.models as unknown[]).push(
        { name: FLAKY, kind: 'chat', deployments: [{ backend: 'down' }, { backend: 'mock' }] },
        { name: DEAD, kind: 'chat', deployments: [{ backend: 'down' }] },
        {
          name: CAPACITY,
          kind: 'chat',
          deployments: [{ backend: 'full' }, { backend: 'roomy', rpm: 100_000, tpm: 10_000_000, maxConcurrent: 8 }],
        },
      )
    },
  })
  t.teardown(() => gw.stop())
  const prom = await startPrometheus(t, [new URL(gw.metricsUrl).host])

  const roomyKey = { '*': { rpm: 1_000_000, input_tpm: 100_000_000, output_tpm: 100_000_000 } }
  const client = sdkClient(gw, (await gw.createKey({ tier: 'Standard4000' })).key)
  const anyModel = sdkClient(gw, (await gw.createKey({ tier: 'Standard4000', limits: roomyKey })).key)
  const ask = (c: OpenAI, model: string, content: string): Promise<OpenAI.ChatCompletion> =>
    c.chat.completions.create({ model, messages: [{ role: 'user', content }], max_tokens: 5 })

  const tight = sdkClient(gw, (await gw.createKey({ tier: 'Standard4000', limits: { '*': { rpm: 1 } } })).key)

  /** One round of everything but the queue. */
  const round = async (n: number): Promise<void> => {
    // Success, priced (tokens and cost), and a stream.
    for (let i = 0; i < 3; i++) await ask(client, CHAT, `hello ${n}.${i}`)
    const stream = await client.chat.completions.create({
      model: CHAT,
      messages: [{ role: 'user', content: `stream please ${n}` }],
      max_tokens: 8,
      stream: true,
    })
    let chunks = 0
    for await (const _ of stream) chunks++
    t.ok(chunks > 1, 'a stream came in pieces')

    // The prompt cache (the mock's, under a prompt_cache_key): a call that writes its
    // prompt, then one that reads it back and writes its new turn.
    const cached = (messages: OpenAI.ChatCompletionMessageParam[]): Promise<OpenAI.ChatCompletion> =>
      client.chat.completions.create({ model: CHAT, messages, max_tokens: 5, prompt_cache_key: `dashboards-${n}` })
    const turn = { role: 'user' as const, content: `cache me ${n}` }
    await cached([turn])
    const reread = await cached([turn, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'again' }])
    t.ok((reread.usage?.prompt_tokens_details?.cached_tokens ?? 0) > 0, 'a call read from the prompt cache')

    // The response cache (docs/cache.md): one body at temperature 0, a miss in the first round, hits after.
    const again = {
      model: CHAT,
      temperature: 0,
      max_tokens: 5,
      messages: [{ role: 'user' as const, content: 'cached' }],
    }
    for (let i = 0; i < 2; i++) await anyModel.chat.completions.create(again)
    // The semantic cache: a paraphrase of a stored question (the mock's bag-of-words vectors, cosine 0.93).
    const question = (content: string) => ({ ...again, messages: [{ role: 'user' as const, content }] })
    await anyModel.chat.completions.create(question('tell me the cached answer now'))
    const { response } = await anyModel.chat.completions
      .create(question(`tell me the cached answer now ${n === 0 ? 'please' : 'kindly'}`))
      .withResponse()
    t.equal(response.headers.get('x-tollgate-cache-match'), 'semantic', 'a paraphrase hit the semantic cache')

    // The key's limit: rpm 1, four calls at once, at least one 429.
    const burst = await Promise.allSettled([0, 1, 2, 3].map((i) => ask(tight, CHAT, `burst ${n}.${i}`)))
    t.ok(
      burst.some((r) => r.status === 'rejected' && r.reason instanceof OpenAI.APIError && r.reason.status === 429),
      'the key limit refused a call with 429',
    )

    // Upstream errors: FLAKY's first deployment is down and the mock saves its calls; DEAD has
    // no other deployment, and its caller gets the 502.
    for (let i = 0; i < 4; i++) await ask(anyModel, FLAKY, `flaky ${n}.${i}`)
    const lost = await ask(anyModel, DEAD, `dead ${n}`).catch((err: unknown) => err)
    t.ok(lost instanceof OpenAI.APIError && lost.status === 502, 'a model whose only upstream is down: 502')

    // Capacity: calls at once; the full deployment refuses and they move to the roomy one.
    const capacityCalls = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) => ask(anyModel, CAPACITY, `capacity ${n}.${i}`)),
    )
    t.ok(
      capacityCalls.every((r) => r.status === 'fulfilled'),
      'every capacity call served',
    )

    // RAG: a public route on the built-in mock (2xx), a token the gateway never issued (4xx).
    t.equal((await fetch(`${gw.url}/config-manager/redoc`)).status, 200)
    const foreign = await fetch(`${gw.url}/chat-session-manager/api/v1/sessions/`, {
      headers: { authorization: 'Bearer not-ours' },
    })
    t.equal(foreign.status, 401)
  }

  // Prometheus computes a rate from a series' second sample on: a counter or histogram
  // first exported after one call shows no rate. The mix runs twice, with a scrape between.
  await round(1)
  t.ok(await scrapedSince(prom.api, Date.now()), 'Prometheus scraped the first round')
  await round(2)
  t.ok(
    (await counterSum(gw, 'tollgate_failovers_total', { backend: 'down' })) > 0,
    'failovers away from the dead deployment',
  )
  t.ok((await counterSum(gw, 'tollgate_upstream_refusals_total')) > 0, 'the full deployment refused')

  // The queue: a key with rpm 1 (a 3 s window). Its first call is admitted; the next ones
  // wait in line, one client leaves while waiting, one request is stored and run later.
  const queueKey = (await gw.createKey({ tier: 'Standard4000', limits: { '*': { rpm: 1 } } })).key
  const queued = new OpenAI({ apiKey: queueKey, baseURL: `${gw.url}/queue`, maxRetries: 0 })
  await ask(queued, CHAT, 'first in line')
  const waiting = [ask(queued, CHAT, 'second'), ask(queued, CHAT, 'third')]
  const leaving = new AbortController()
  const left = fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${queueKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'leaving' }], max_tokens: 5 }),
    signal: leaving.signal,
  }).catch((err: unknown) => err)
  const accepted = await fetch(`${gw.url}/queue/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${queueKey}`, 'content-type': 'application/json', prefer: 'respond-async' },
    body: JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'stored' }], max_tokens: 5 }),
  })
  t.equal(accepted.status, 202, 'a stored request accepted')
  const storedId = ((await accepted.json()) as { id: string }).id
  // Prometheus sees the line before anyone leaves it: the depth and age panels have a point.
  const seenWaiting = await pollUntil(
    async () =>
      (
        await promGet<{ result: PromResult[] }>(
          `${prom.api}/query?${new URLSearchParams({ query: 'max(tollgate_queue_depth) >= 1' })}`,
        )
      )?.result ?? [],
    (r) => r.length > 0,
    300,
    100,
  )
  t.ok(seenWaiting.met, 'Prometheus scraped a line with calls waiting')
  leaving.abort()
  t.ok((await left) instanceof Error, 'the leaving client gave up')
  for (const answer of await Promise.all(waiting)) t.equal(answer.object, 'chat.completion', 'a queued call served')
  const done = await pollUntil(
    async () =>
      (
        (await (
          await fetch(`${gw.url}/queue/requests/${storedId}`, { headers: { authorization: `Bearer ${queueKey}` } })
        ).json()) as { status: string }
      ).status,
    (s) => s === 'completed' || s === 'failed',
    300,
    100,
  )
  t.equal(done.value, 'completed', 'the stored request ran')
  t.ok(
    (await counterSum(gw, 'tollgate_queue_requests_total', { mode: 'dropin', outcome: 'left' })) > 0,
    'the leaving client counted',
  )
  // The gateway's overhead leaves the time in line out: the queued calls waited seconds, the
  // gateway's own share of them stayed below that.
  const route = { endpoint: 'queue.chat.completions' }
  const overheadCount = await counterSum(gw, 'tollgate_gateway_overhead_seconds_count', route)
  const overheadSum = await counterSum(gw, 'tollgate_gateway_overhead_seconds_sum', route)
  const waitedSum = await counterSum(gw, 'tollgate_queue_wait_seconds_sum', { mode: 'dropin' })
  t.ok(overheadCount >= 3, `the overhead of each queued call served (${overheadCount})`)
  t.ok(waitedSum >= 2.5, `the queued calls waited (${waitedSum.toFixed(2)} s in all)`)
  t.ok(overheadSum < waitedSum / 2, `their overhead (${overheadSum.toFixed(3)} s in all) does not count the wait`)

  // Every panel's query, over the traffic's span, as Grafana asks it.
  const queries = panelQueries()
  t.ok(queries.length >= 30, `the dashboards have their queries (${queries.length})`)
  const pending = new Map(queries.map((q) => [q, substitute(q.expr, readDashboard(q.file))]))
  const deadline = Date.now() + 30_000
  while (pending.size > 0 && Date.now() < deadline) {
    const end = Date.now() / 1000
    for (const [q, promql] of pending) {
      const params = new URLSearchParams({ query: promql, start: String(started), end: String(end), step: '1' })
      const data = await promGet<{ result: PromResult[] }>(`${prom.api}/query_range?${params}`)
      if (data !== null && hasData(data.result)) pending.delete(q)
    }
    if (pending.size > 0) await new Promise((wait) => setTimeout(wait, 500))
  }
  for (const q of queries)
    t.notOk(pending.has(q), `${q.file} "${q.panel}" ${q.legend || q.expr}: has data`, { query: pending.get(q) })

  // The shipped alerting rules were loaded and evaluate without error.
  const rules = await pollUntil(
    async () =>
      (
        (await promGet<{ groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> }>(
          `${prom.api}/rules`,
        )) ?? { groups: [] }
      ).groups.flatMap((g) => g.rules),
    (r) => r.length > 0 && r.every((rule) => rule.health !== 'unknown'),
    100,
    200,
  )
  t.ok(rules.value.length >= 6, `Prometheus loaded the alerting rules (${rules.value.length})`)
  for (const rule of rules.value) t.equal(rule.health, 'ok', `${rule.name} evaluates`, { error: rule.lastError })
})
