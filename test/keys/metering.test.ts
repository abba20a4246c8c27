// Metering end to end: two gateway processes on one Redis, in front of a separate
// OpenAI-compatible upstream process, serve concurrent streaming and non-streaming calls,
// some cut off by their client; one instance loses Redis in the middle and is stopped
// before it is back. Afterwards the usage store holds, per key and model, exactly the
// tokens the calls used, costed at the plan's prices.
//
// What "the usage the backend reported" means here:
// - a completed call: the `usage` the upstream put in its JSON reply or in the last chunk
//   of its stream (the client asks for it with stream_options.include_usage), as the
//   client received it;
// - a stream the client cut off: the upstream never got to report anything (its usage
//   chunk comes last, and the gateway stops reading when the client leaves). What is
//   charged is what the gateway counted: the prompt as its tokenizer counts it plus the
//   tokens of the text it relayed (or the upstream's usage, if the whole stream had
//   already arrived). That figure is in the gateway's request log line (inputTokens,
//   outputTokens), found by the x-request-id the test sends, and is what the test sums.
//
// Redis at REDIS_URL (default 127.0.0.1:6379) is shared: the gateways use a random key
// prefix, deleted at the end. Without Redis this test fails; it never skips.
import { randomBytes } from 'node:crypto'
import { join, resolve } from 'node:path'
import t from 'tap'
import { pollUntil } from '../helpers/poll.ts'
import { loadPlans } from '../../src/config/load.ts'
import { resolveLimits } from '../../src/limits/plans.ts'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { REDIS_URL, redisMissing, redisNamespace } from './redis-namespace.ts'
import { startTcpProxy } from './tcp-proxy.ts'

const plans = loadPlans(join(resolve(import.meta.dirname, '../..'), 'config/plans.yaml'))
const KEY_SECRET = `metering-${randomBytes(16).toString('hex')}`
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`
const MODELS = ['gpt-4o', 'claude-sonnet-4'] as const

interface Counted {
  requests: number
  input: number
  output: number
}
type Kind = 'json' | 'stream' | 'abort'
interface Call {
  gw: RunningTollgate
  keyId: string
  key: string
  model: string
  kind: Kind
  maxTokens: number
}
interface Outcome {
  call: Call
  requestId: string
  usage?: { prompt_tokens: number; completion_tokens: number }
}

const ns = await redisNamespace(t)

if (!ns.up) {
  t.fail(redisMissing())
} else {
  const upstream: UpstreamProcess = await startUpstream()
  t.teardown(() => upstream.stop())
  // Instance b reaches Redis through a proxy the test can cut.
  const redisUrl = new URL(REDIS_URL)
  const proxy = await startTcpProxy(redisUrl.hostname, Number(redisUrl.port || 6379))
  t.teardown(() => proxy.close())

  const start = (url: string): Promise<RunningTollgate> =>
    startTollgate({
      adminToken: ADMIN_TOKEN,
      env: { REDIS_URL: url, TOLLGATE_KEY_SECRET: KEY_SECRET },
      config: (doc) => {
        const store = doc.store as Record<string, unknown>
        const server = doc.server as Record<string, unknown>
        store.keyPrefix = ns.prefix
        // The instances are stopped only when no call is in flight: no drain to wait for,
        // so the meter's close() starts at once (while b's Redis is still away).
        server.shutdownGraceMs = 0
        doc.backends = {
          ...(doc.backends as Record<string, unknown>),
          up: { type: 'openai', baseUrl: `${upstream.url}/v1` },
        }
        doc.models = MODELS.map((name) => ({ name, kind: 'chat', deployments: [{ backend: 'up' }] }))
      },
    })
  const a = await start(REDIS_URL)
  const proxied = new URL(REDIS_URL)
  proxied.hostname = '127.0.0.1'
  proxied.port = String(proxy.port)
  const b = await start(proxied.toString())
  t.teardown(async () => {
    await a.stop()
    await b.stop()
  })

  const admin = async (gw: RunningTollgate, method: string, path: string, body?: unknown): Promise<unknown> => {
    const res = await fetch(`${gw.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
    return res.json()
  }
  const newKey = async (tier: string, owner: string): Promise<{ id: string; key: string; tier: string }> => ({
    ...((await admin(a, 'POST', '/admin/keys', { tier, owner })) as { id: string; key: string }),
    tier,
  })
  const keys = [
    await newKey('Standard4000', 'team-a'),
    await newKey('Standard1000', 'team-b'),
    await newKey('Standard4000', 'team-c'),
  ]

  /**
   * Sends one call; resolves once the client is done (completed, or cut off after the
   * first chunk). `started` is told when the first content arrives; a cut-off stream
   * waits for `abortAfter` before it leaves.
   */
  async function send(call: Call, hooks: { started?: () => void; abortAfter?: Promise<void> } = {}): Promise<Outcome> {
    const requestId = `meter-${randomBytes(8).toString('hex')}`
    const stream = call.kind !== 'json'
    const controller = new AbortController()
    const res = await fetch(`${call.gw.url}/v2/chat/completions`, {
      method: 'POST',
      signal: controller.signal,
      headers: { authorization: `Bearer ${call.key}`, 'content-type': 'application/json', 'x-request-id': requestId },
      body: JSON.stringify({
        model: call.model,
        messages: [{ role: 'user', content: `metering ${requestId}` }],
        max_tokens: call.maxTokens,
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      }),
    })
    if (res.status !== 200) throw new Error(`${call.kind} call: ${res.status} ${await res.text()}`)
    if (!stream) return { call, requestId, usage: ((await res.json()) as { usage: Outcome['usage'] }).usage }
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ''
    let announced = false
    for (;;) {
      const next = await reader.read()
      if (next.done) break
      text += decoder.decode(next.value, { stream: true })
      if (!text.includes('"content"')) continue
      if (!announced) {
        announced = true
        hooks.started?.()
      }
      if (call.kind === 'abort') {
        if (hooks.abortAfter) await hooks.abortAfter
        controller.abort()
        await reader.cancel().catch(() => undefined)
        return { call, requestId }
      }
    }
    const chunks = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: Outcome['usage'] | null })
    const usage = chunks.findLast((c) => c.usage)?.usage ?? undefined
    if (!usage) throw new Error('a completed stream without usage')
    return { call, requestId, usage }
  }

  const KINDS: readonly Kind[] = ['json', 'stream', 'abort']
  /** Every (instance, key, model, kind), in an order that mixes them. */
  const calls = (gws: RunningTollgate[], maxTokens: (kind: Kind, i: number) => number): Call[] => {
    const out: Call[] = []
    for (const kind of KINDS)
      for (const model of MODELS)
        for (const key of keys)
          for (const gw of gws) {
            out.push({ gw, keyId: key.id, key: key.key, model, kind, maxTokens: maxTokens(kind, out.length) })
          }
    return out.sort((x, y) => ((x.maxTokens * 31 + x.model.length) % 17) - ((y.maxTokens * 31 + y.model.length) % 17))
  }

  const outcomes: Outcome[] = []

  t.test('concurrent calls over both instances, some cut off by the client', async (t) => {
    const batch = calls([a, b], (kind, i) => (kind === 'abort' ? 800 : 5 + ((i * 7) % 60)))
    outcomes.push(...(await Promise.all(batch.map((c) => send(c)))))
    t.equal(outcomes.length, 36)
    t.equal(outcomes.filter((o) => o.call.kind === 'abort').length, 12, 'twelve streams cut off')
    t.equal(
      new Set(outcomes.map((o) => `${o.call.gw.url}/${o.call.keyId}/${o.call.model}/${o.call.kind}`)).size,
      36,
      'every instance, key, model and kind',
    )
  })

  t.test(
    'instance b loses Redis with calls in flight, is stopped before Redis is back, and still writes its usage',
    async (t) => {
      let cut!: () => void
      const cutDone = new Promise<void>((done) => {
        cut = done
      })
      // Long streams on b: Redis goes away after they started and before they end.
      const batch = calls([b], (kind) => (kind === 'abort' ? 2000 : 1200)).filter(
        (c) => c.kind !== 'json' && c.model === 'gpt-4o',
      )
      let started = 0
      let allStarted!: () => void
      const running = new Promise<void>((done) => {
        allStarted = done
      })
      const sent = batch.map((c) =>
        send(c, {
          started: () => {
            if (++started === batch.length) allStarted()
          },
          abortAfter: cutDone,
        }),
      )
      // Cut once every stream is admitted and under way: they end while Redis is away.
      await running
      proxy.cut()
      cut()
      outcomes.push(...(await Promise.all(sent)))
      const failed = async (): Promise<boolean> => b.output().includes('usage metering write failed')
      let saw = false
      for (let i = 0; i < 150 && !(saw = await failed()); i++) await new Promise((r) => setTimeout(r, 20))
      t.ok(saw, 'b tried to write its usage while Redis was away, and kept the rows')
      // Stopped while Redis is still away; it comes back during the shutdown.
      const stopping = b.stop()
      setTimeout(() => proxy.restore(), 300)
      t.equal(await stopping, 0, 'b exited cleanly')
      const output = b.output()
      t.ok(
        output.lastIndexOf('usage metering writes again') > output.indexOf('"msg":"shutting down"'),
        'the kept rows were written during the shutdown',
      )
      t.notMatch(output, 'could not be written at shutdown', 'nothing given up')
      t.equal(await a.stop(), 0, 'a exited cleanly')
    },
  )

  t.test('the metered tokens equal, exactly, what the calls used; cost matches the plan', async (t) => {
    t.equal(outcomes.length, 42)
    const logs = new Map<string, Record<string, unknown>>()
    const readLogs = (): Map<string, Record<string, unknown>> => {
      for (const gw of [a, b])
        for (const line of gw.logs())
          if (line.msg === 'request' && typeof line.reqId === 'string') logs.set(line.reqId, line)
      return logs
    }
    // A cut-off stream's line is written when the gateway has settled it, which may come after
    // the client left: wait (bounded) until every one is there.
    const cutOff = outcomes.filter((o) => !o.usage).map((o) => o.requestId)
    await pollUntil(
      async () => readLogs(),
      (read) => cutOff.every((id) => read.has(id)),
      500,
      20,
    )

    const expected = new Map<string, Counted>()
    for (const o of outcomes) {
      let input: number
      let output: number
      if (o.usage) {
        input = o.usage.prompt_tokens
        output = o.usage.completion_tokens
      } else {
        // Cut off by the client: what the gateway counted, from its request log line.
        const line = logs.get(o.requestId)
        t.ok(line, `a log line for the cut-off stream ${o.requestId}`)
        t.equal(line?.keyId, o.call.keyId, 'the line names the key')
        t.equal(line?.aborted, true, 'and says the client left')
        input = Number(line?.inputTokens)
        output = Number(line?.outputTokens)
        t.ok(Number.isInteger(input) && input > 0, 'the prompt is charged')
        t.ok(Number.isInteger(output) && output > 0 && output <= o.call.maxTokens, 'the relayed output is charged')
      }
      const id = `${o.call.keyId}/${o.call.model}`
      const e = expected.get(id) ?? { requests: 0, input: 0, output: 0 }
      expected.set(id, { requests: e.requests + 1, input: e.input + input, output: e.output + output })
    }

    // Read back through a fresh instance: the rows are in Redis, not in a process.
    const c = await start(REDIS_URL)
    t.teardown(async () => {
      await c.stop()
    })
    // Prices have two decimals: hundredths per million tokens are whole numbers, and the
    // API's cost is exactly that ÷ 10⁸, to the last digit of the double.
    let totalCents = 0
    for (const key of keys) {
      const usage = (await admin(c, 'GET', `/admin/keys/${key.id}/usage`)) as {
        data: Array<{ model: string; requests: number; input_tokens: number; output_tokens: number; cost: number }>
        totals: { cost: number }
      }
      let keyCents = 0
      for (const model of MODELS) {
        const want = expected.get(`${key.id}/${model}`)
        const rows = usage.data.filter((r) => r.model === model)
        const got = rows.reduce(
          (s, r) => ({
            requests: s.requests + r.requests,
            input: s.input + r.input_tokens,
            output: s.output + r.output_tokens,
          }),
          { requests: 0, input: 0, output: 0 },
        )
        t.same(
          got,
          want ?? { requests: 0, input: 0, output: 0 },
          `${key.tier} key, ${model}: requests, input and output tokens`,
        )
        const { limits } = resolveLimits(plans, { tier: key.tier, limits: null }, model)
        const cents =
          Math.round((limits.input_price ?? 0) * 100) * got.input +
          Math.round((limits.output_price ?? 0) * 100) * got.output
        t.ok(cents > 0, `${key.tier}/${model} is priced`)
        const metered = rows.reduce((s, r) => s + Math.round(r.cost * 1e9), 0)
        t.equal(metered, cents * 10, `${key.tier} key, ${model}: ${metered} nano-units, as the plan's prices say`)
        keyCents += cents
      }
      t.equal(usage.totals.cost, keyCents / 1e8, `${key.tier} key: total cost ${usage.totals.cost}, exact`)
      totalCents += keyCents
    }
    const all = (await admin(c, 'GET', '/admin/usage?group_by=model')) as {
      totals: { requests: number; input_tokens: number; output_tokens: number; cost: number }
    }
    const sum = [...expected.values()].reduce(
      (s, e) => ({ requests: s.requests + e.requests, input: s.input + e.input, output: s.output + e.output }),
      { requests: 0, input: 0, output: 0 },
    )
    t.same(
      { requests: all.totals.requests, input: all.totals.input_tokens, output: all.totals.output_tokens },
      sum,
      'across keys: the same sums',
    )
    t.equal(all.totals.cost, totalCents / 1e8, 'across keys: the same cost, exact')
  })
}
