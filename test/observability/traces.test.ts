// Traces (issue #26): a real gateway with tracing.enabled exports OTLP/HTTP protobuf to a
// receiver in this test, which decodes it with the official opentelemetry-proto files.
// A chat call, a stream, a /queue drop-in call, a stored request (Prefer: respond-async) and RAG calls
// each give their spans, attributes and parent links, the client's traceparent continued
// through to the upstream (and the RAG backend), and the trace id in the access log.
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, startUpstream } from '../helpers/gateway.ts'
import { KIND, startOtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.ts'

const MODEL = 'gpt-oss-120b'
const PROMPT = 'a prompt that must never reach a span'

/** A client's own trace context: a fresh trace id and the id of its (client) span. */
function clientContext(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = randomBytes(16).toString('hex')
  const spanId = randomBytes(8).toString('hex')
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` }
}

/** The ids a traceparent header names. */
function parentOf(header: string | string[] | undefined): { traceId: string; spanId: string } | undefined {
  const match = /^00-([\da-f]{32})-([\da-f]{16})-0[01]$/.exec(String(header ?? ''))
  return match === null ? undefined : { traceId: match[1] ?? '', spanId: match[2] ?? '' }
}

t.test('traces: spans, attributes, parents and trace context for chat, stream, queue and RAG', async (t) => {
  const receiver = await startOtlpReceiver()
  t.teardown(() => receiver.close())
  const upstream = await startUpstream()
  t.teardown(() => upstream.stop())
  // A RAG backend that records the headers it receives (config-manager points at it).
  const ragSeen: IncomingHttpHeaders[] = []
  const ragBackend = createServer((req, res) => {
    ragSeen.push(req.headers)
    req.resume()
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
  })
  await new Promise<void>((done) => ragBackend.listen(0, '127.0.0.1', done))
  t.teardown(() => new Promise<void>((done) => ragBackend.close(() => done())))

  const gw = await startTollgate({
    config: (doc) => {
      doc.tracing = { enabled: true }
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: `${upstream.url}/v1` } }
      for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
        if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
      const rag = doc.rag as { services: Record<string, Record<string, unknown>> }
      rag.services['config-manager'] = {
        baseUrl: `http://127.0.0.1:${(ragBackend.address() as { port: number }).port}`,
      }
    },
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_SERVICE_NAME: 'tollgate-under-test',
    },
  })
  t.teardown(() => gw.stop())
  const key = await gw.createKey({ name: 'traced' })
  const client = new OpenAI({ apiKey: key.key, baseURL: `${gw.url}/v2`, maxRetries: 0 })

  const inTrace = (traceId: string) => (spans: readonly ReceivedSpan[]) => spans.filter((s) => s.traceId === traceId)
  const childrenOf = (spans: readonly ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] =>
    spans.filter((s) => s.parentSpanId === parent.spanId)
  /** The call's span and its three steps, once all of them arrived. */
  const callSpans = (traceId: string, kind: number) => (spans: readonly ReceivedSpan[]) => {
    const call = inTrace(traceId)(spans).find((s) => s.kind === kind && s.name === `chat ${MODEL}`)
    if (call === undefined) return undefined
    const steps = childrenOf(spans, call)
    const admission = steps.find((s) => s.name === 'admission')
    const attempt = steps.find((s) => s.kind === KIND.client)
    const settlement = steps.find((s) => s.name === 'settlement')
    return admission && attempt && settlement ? { call, admission, attempt, settlement } : undefined
  }
  const upstreamSaw = async (traceId: string): Promise<{ traceId: string; spanId: string }> => {
    const requests = (await upstream.requests()) as Array<{ headers: IncomingHttpHeaders }>
    const seen = requests.map((r) => parentOf(r.headers.traceparent)).find((p) => p?.traceId === traceId)
    if (seen === undefined) throw new Error(`the upstream saw no traceparent of trace ${traceId}`)
    return seen
  }

  await t.test('a chat call', async (t) => {
    const ctx = clientContext()
    const reply = await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 16 },
      { headers: { traceparent: ctx.traceparent, tracestate: 'vendor=kept' } },
    )
    t.ok(reply.choices[0]?.message.content, 'the call works')
    const { call, admission, attempt, settlement } = await receiver.waitFor(
      callSpans(ctx.traceId, KIND.server),
      'chat call',
    )
    t.equal(call.parentSpanId, ctx.spanId, "the call's span continues the client's")
    t.equal(call.resource['service.name'], 'tollgate-under-test', 'OTEL_SERVICE_NAME names the service')
    t.match(call.attributes, {
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': MODEL,
      'gen_ai.response.model': MODEL,
      'gen_ai.usage.input_tokens': reply.usage?.prompt_tokens,
      'gen_ai.usage.output_tokens': reply.usage?.completion_tokens,
      'tollgate.key.id': key.id,
      'tollgate.tier': 'Basic',
      'tollgate.deployment': `up/${MODEL}`,
      'tollgate.admission.decision': 'admitted',
      'http.response.status_code': 200,
    })
    t.type(call.attributes['tollgate.admission.wait_ms'], 'number')
    t.equal(admission.kind, KIND.internal)
    t.equal(admission.attributes['tollgate.admission.decision'], 'admitted')
    t.match(attempt, { name: `chat ${MODEL}`, attributes: { 'http.response.status_code': 200 } })
    t.equal(settlement.attributes['gen_ai.usage.output_tokens'], reply.usage?.completion_tokens)
    const seen = await upstreamSaw(ctx.traceId)
    t.equal(seen.spanId, attempt.spanId, "the upstream's parent is the attempt's span, in the client's trace")
    const requests = (await upstream.requests()) as Array<{ headers: IncomingHttpHeaders }>
    t.equal(
      requests.find((r) => parentOf(r.headers.traceparent)?.traceId === ctx.traceId)?.headers.tracestate,
      'vendor=kept',
      'the tracestate travels with it',
    )
    const everything = JSON.stringify(inTrace(ctx.traceId)(receiver.spans()))
    t.notOk(everything.includes(PROMPT), 'no prompt in any span (captureContent is off)')
    t.notOk(everything.includes(reply.choices[0]?.message.content ?? '\0'), 'no completion either')
    const line = await waitForLog(gw, (l) => l.msg === 'request' && l.traceId === ctx.traceId)
    t.equal(line.route, 'chat.completions', 'the access log line carries the trace id')
  })

  await t.test('a stream', async (t) => {
    const ctx = clientContext()
    const stream = await client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'stream please' }], stream: true, max_tokens: 16 },
      { headers: { traceparent: ctx.traceparent } },
    )
    let text = ''
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
    t.ok(text.length > 0, 'the stream flows')
    const { call, attempt } = await receiver.waitFor(callSpans(ctx.traceId, KIND.server), 'streamed call')
    t.equal(call.parentSpanId, ctx.spanId)
    t.ok(Number(call.attributes['gen_ai.usage.output_tokens']) > 0, "the stream's usage is on its span")
    t.equal((await upstreamSaw(ctx.traceId)).spanId, attempt.spanId)
  })

  await t.test('a /queue drop-in call: its wait in line is its admission', async (t) => {
    const ctx = clientContext()
    const queued = new OpenAI({ apiKey: key.key, baseURL: `${gw.url}/queue`, maxRetries: 0 })
    const { data: reply, response } = await queued.chat.completions
      .create(
        { model: MODEL, messages: [{ role: 'user', content: 'in line' }], max_tokens: 8 },
        { headers: { traceparent: ctx.traceparent } },
      )
      .withResponse()
    t.ok(reply.choices[0]?.message.content)
    const { call, admission, attempt } = await receiver.waitFor(callSpans(ctx.traceId, KIND.server), 'drop-in call')
    t.equal(call.parentSpanId, ctx.spanId)
    t.match(call.attributes, {
      'tollgate.route': 'queue.chat.completions',
      'gen_ai.operation.name': 'chat',
      'tollgate.queue.wait_ms': Number(response.headers.get('x-queue-wait-ms')),
    })
    t.equal(admission.attributes['tollgate.admission.decision'], 'admitted')
    t.equal((await upstreamSaw(ctx.traceId)).spanId, attempt.spanId)
  })

  await t.test('a stored request (/queue, Prefer: respond-async) keeps its trace across the wait', async (t) => {
    const ctx = clientContext()
    const accepted = await fetch(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key.key}`,
        'content-type': 'application/json',
        prefer: 'respond-async',
        traceparent: ctx.traceparent,
      },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'later' }], max_tokens: 8 }),
    })
    t.equal(accepted.status, 202)
    const { id } = (await accepted.json()) as { id: string }
    const accepting = await receiver.waitFor(
      (spans) => inTrace(ctx.traceId)(spans).find((s) => s.kind === KIND.server),
      'accepting span',
    )
    t.equal(accepting.parentSpanId, ctx.spanId, "acceptance continues the client's trace")
    t.match(accepting.attributes, { 'tollgate.admission.decision': 'queued', 'tollgate.queue.id': id })
    const { call, attempt } = await receiver.waitFor(callSpans(ctx.traceId, KIND.consumer), 'run of the stored request')
    t.equal(call.parentSpanId, accepting.spanId, 'its run is a child of the span that accepted it')
    t.same(call.links, [{ traceId: ctx.traceId, spanId: accepting.spanId }], 'and linked to it')
    t.match(call.attributes, { 'tollgate.queue.id': id, 'tollgate.key.id': key.id, 'http.response.status_code': 200 })
    t.type(call.attributes['tollgate.queue.wait_ms'], 'number')
    t.equal((await upstreamSaw(ctx.traceId)).spanId, attempt.spanId, 'the upstream gets the same trace')
  })

  await t.test('RAG calls: the request span, the backend step, the trace context sent on', async (t) => {
    const admin = { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' }
    const user = { username: 'tracy', password: 'correct horse battery staple' }
    t.equal(
      (await fetch(`${gw.url}/admin/users`, { method: 'POST', headers: admin, body: JSON.stringify(user) })).status,
      201,
    )
    const login = await fetch(`${gw.url}/api/v1/auth/user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(user),
    })
    const { access_token: token } = (await login.json()) as { access_token: string }

    const mocked = clientContext()
    const sessions = await fetch(`${gw.url}/chat-session-manager/api/v1/sessions/`, {
      headers: { authorization: `Bearer ${token}`, traceparent: mocked.traceparent },
    })
    t.equal(sessions.status, 200, 'the built-in mock answers')
    const [request, step] = await receiver.waitFor((spans) => {
      const request = inTrace(mocked.traceId)(spans).find((s) => s.kind === KIND.server)
      const step = request && childrenOf(spans, request).find((s) => s.kind === KIND.client)
      return request && step ? ([request, step] as const) : undefined
    }, 'RAG spans')
    t.equal(request.parentSpanId, mocked.spanId)
    t.match(request.attributes, { 'tollgate.route': 'rag.chat-session-manager', 'http.response.status_code': 200 })
    t.match(step.attributes, { 'tollgate.rag.service': 'chat-session-manager', 'http.response.status_code': 200 })

    const relayed = clientContext()
    const config = await fetch(`${gw.url}/config-manager/api/v1/configs`, {
      headers: { authorization: `Bearer ${token}`, traceparent: relayed.traceparent },
    })
    t.equal(config.status, 200)
    const ragStep = await receiver.waitFor(
      (spans) => inTrace(relayed.traceId)(spans).find((s) => s.kind === KIND.client),
      'RAG backend step',
    )
    const sent = ragSeen.map((h) => parentOf(h.traceparent)).find((p) => p?.traceId === relayed.traceId)
    t.same(sent, { traceId: relayed.traceId, spanId: ragStep.spanId }, "the RAG backend's parent is the gateway's step")
  })

  t.same(receiver.rejected, [], 'every export was OTLP protobuf to /v1/traces')
})

async function waitForLog(
  gw: { logs(): Array<Record<string, unknown>> },
  found: (line: Record<string, unknown>) => boolean,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 15_000
  for (;;) {
    const line = gw.logs().find(found)
    if (line !== undefined) return line
    if (Date.now() > deadline) throw new Error('no such log line')
    await new Promise((done) => setTimeout(done, 50))
  }
}
