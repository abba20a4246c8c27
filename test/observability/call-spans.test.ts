// The corridor's steps as spans (src/observability/call-spans.ts), on a recording stand-in
// for the port: what each step records, that a refusal and a failed attempt are marked so,
// that an attempt ends only when its reply has been read, that prompts are recorded only
// when captureContent says so, and that the no-op records nothing and wraps nothing.
import { PassThrough } from 'node:stream'
import t from 'tap'
import type { BackendAdapter, UpstreamRequest } from '../../src/backends/port.ts'
import { gatewayError } from '../../src/errors.ts'
import type { Admission } from '../../src/limits/port.ts'
import {
  captureCompletion,
  endCallSpan,
  operationOf,
  traceAdmission,
  tracedTargets,
  traceSettlement,
} from '../../src/observability/call-spans.ts'
import { NO_SPAN, traceHeadersOf, traceIdOf, type Span, type SpanAttributes } from '../../src/observability/tracing.ts'

interface Recorded extends Span {
  readonly name: string
  readonly kind: string
  readonly attributes: Record<string, unknown>
  readonly children: Recorded[]
  readonly ended: boolean
  readonly failed: string | undefined
}

function recordingSpan(name: string, kind = 'server', captureContent = false): Recorded {
  const state = { name, ended: false, failed: undefined as string | undefined }
  const attributes: Record<string, unknown> = {}
  const children: Recorded[] = []
  const set = (more: SpanAttributes | undefined): void => {
    for (const [k, v] of Object.entries(more ?? {})) if (v !== undefined) attributes[k] = v
  }
  return {
    recording: true,
    traceId: '0af7651916cd43dd8448eb211c80319c',
    captureContent,
    get name() {
      return state.name
    },
    kind,
    attributes,
    children,
    get ended() {
      return state.ended
    },
    get failed() {
      return state.failed
    },
    set,
    rename: (n) => (state.name = n),
    child(childName, childKind, childAttributes) {
      const child = recordingSpan(childName, childKind)
      child.set(childAttributes ?? {})
      children.push(child)
      return child
    },
    headers: () => ({ traceparent: `00-0af7651916cd43dd8448eb211c80319c-${'b'.repeat(16)}-01` }),
    fail: (type) => (state.failed = type),
    end: () => (state.ended = true),
  }
}

const admitted: Admission = { headers: {}, settle: async () => {} }
const chatBody = {
  kind: 'json',
  value: { model: 'm', messages: [{ role: 'user', content: 'secret prompt' }] },
} as const

t.test('admission: decided, timed, refusals marked; prompts only with captureContent', async (t) => {
  const call = recordingSpan('call')
  t.equal(await traceAdmission(call, chatBody, async () => admitted), admitted)
  const [step] = call.children
  t.match(step, { name: 'admission', kind: 'internal', ended: true, failed: undefined })
  t.equal(step?.attributes['tollgate.admission.decision'], 'admitted')
  t.equal(call.attributes['tollgate.admission.decision'], 'admitted', 'the call says it too')
  t.notOk(JSON.stringify(call.attributes).includes('secret prompt'), 'no prompt without captureContent')

  const refused = recordingSpan('call')
  const thrown = await traceAdmission(refused, chatBody, () =>
    Promise.reject(gatewayError('rate_limit_requests')),
  ).then(
    () => undefined,
    (err: unknown) => err,
  )
  t.match(thrown, { errorName: 'rate_limit_requests' }, 'the refusal goes on to the client')
  t.match(refused.children[0], { ended: true, failed: 'rate_limit_requests' })
  t.match(refused.attributes, {
    'tollgate.admission.decision': 'refused',
    'tollgate.admission.refusal': 'rate_limit_requests',
  })

  const capturing = recordingSpan('call', 'server', true)
  await traceAdmission(capturing, chatBody, async () => admitted)
  t.equal(capturing.attributes['gen_ai.input.messages'], JSON.stringify(chatBody.value.messages))
})

function fakeAdapter(answer: () => Promise<{ status: number; body: PassThrough }>): {
  adapter: BackendAdapter
  sent: UpstreamRequest[]
} {
  const sent: UpstreamRequest[] = []
  return {
    sent,
    adapter: {
      name: 'up',
      type: 'openai',
      supports: () => true,
      close: async () => {},
      async send(request) {
        sent.push(request)
        const { status, body } = await answer()
        return { status, headers: {}, body }
      },
    },
  }
}

const request = { endpoint: 'chat.completions', model: 'upstream-m' } as unknown as UpstreamRequest

t.test('an upstream attempt: its own span, its context sent, ended once the reply was read', async (t) => {
  const call = recordingSpan('call')
  const body = new PassThrough()
  const { adapter, sent } = fakeAdapter(async () => ({ status: 200, body }))
  const [target] = tracedTargets(call, [{ adapter, upstreamModel: 'upstream-m' }])
  const response = await target!.adapter.send(request)
  t.equal(response.status, 200)
  t.match(sent[0]?.trace, { traceparent: /^00-0af7651916cd43dd8448eb211c80319c-b{16}-01$/ }, 'sent upstream')
  const [attempt] = call.children
  t.match(attempt, { name: 'chat upstream-m', kind: 'client', ended: false })
  t.match(attempt?.attributes, { 'tollgate.deployment': 'up/upstream-m', 'http.response.status_code': 200 })
  t.equal(call.attributes['gen_ai.response.model'], 'upstream-m')
  body.resume()
  body.end()
  await new Promise((done) => body.once('close', done))
  t.ok(attempt?.ended, 'ended when its body closed')

  const failing = recordingSpan('call')
  const broken = fakeAdapter(() => Promise.reject(gatewayError('upstream_unreachable')))
  const [down] = tracedTargets(failing, [{ adapter: broken.adapter, upstreamModel: 'upstream-m' }])
  await t.rejects(down!.adapter.send(request))
  t.match(failing.children[0], { ended: true, failed: 'upstream_unreachable' })
})

t.test('settlement, and the call span named and closed', async (t) => {
  const call = recordingSpan('POST')
  let settled = false
  await traceSettlement(call, { inputTokens: 3, outputTokens: 5 }, async () => {
    settled = true
  })
  t.ok(settled)
  t.match(call.children[0], { name: 'settlement', ended: true, attributes: { 'gen_ai.usage.output_tokens': 5 } })
  endCallSpan(call, {
    route: 'queue.chat.completions',
    model: 'm',
    keyId: 'key_1',
    status: 502,
    usage: { inputTokens: 3, outputTokens: 5 },
  })
  t.match(call, {
    name: 'chat m',
    ended: true,
    failed: '502',
    attributes: { 'gen_ai.operation.name': 'chat', 'gen_ai.usage.input_tokens': 3, 'tollgate.key.id': 'key_1' },
  })
  t.equal(operationOf('embeddings'), 'embeddings')
  t.equal(operationOf('images.generations'), 'images.generations', 'one the conventions do not name keeps its own')
})

t.test('completions: recorded only with captureContent, whole or streamed', async (t) => {
  t.equal(captureCompletion(recordingSpan('call')), undefined, 'not without captureContent')
  t.equal(captureCompletion(NO_SPAN), undefined)
  const whole = recordingSpan('call', 'server', true)
  const capture = captureCompletion(whole)
  capture?.observe({ choices: [{ index: 0, message: { role: 'assistant', content: 'hi there' } }] })
  capture?.flush()
  t.equal(whole.attributes['gen_ai.output.messages'], '[{"role":"assistant","content":"hi there"}]')
  const streamed = recordingSpan('call', 'server', true)
  const events = captureCompletion(streamed)
  for (const piece of ['hel', 'lo']) events?.observe({ choices: [{ index: 0, delta: { content: piece } }] })
  events?.observe({ choices: [], usage: { prompt_tokens: 1 } })
  events?.observe(undefined)
  events?.flush()
  t.equal(streamed.attributes['gen_ai.output.messages'], '[{"role":"assistant","content":"hello"}]')
})

t.test('the no-op: nothing recorded, the deployments passed through as they are', async (t) => {
  const targets = [
    { adapter: fakeAdapter(async () => ({ status: 200, body: new PassThrough() })).adapter, upstreamModel: null },
  ]
  t.equal(tracedTargets(NO_SPAN, targets), targets)
  t.equal(tracedTargets(undefined, targets), targets)
  t.equal(await traceAdmission(NO_SPAN, chatBody, async () => admitted), admitted)
  t.same(NO_SPAN.headers(), {})
  t.equal(NO_SPAN.child('x', 'internal'), NO_SPAN)
})

t.test("a client's trace context read from its headers (the access log names its trace with traces off)", async (t) => {
  const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
  t.equal(traceIdOf(traceparent), '4bf92f3577b34da6a3ce929d0e0e4736')
  t.equal(traceIdOf([traceparent, 'another']), '4bf92f3577b34da6a3ce929d0e0e4736', 'the first of several')
  t.equal(traceIdOf(undefined), undefined)
  t.equal(traceIdOf('00-00000000000000000000000000000000-00f067aa0ba902b7-01'), undefined, 'the invalid all-zero id')
  t.equal(traceIdOf('not a traceparent'), undefined)
  t.equal(traceIdOf('00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'), undefined, 'upper case is not W3C')
  t.same(traceHeadersOf({ traceparent, tracestate: 'a=1' }), { traceparent, tracestate: 'a=1' })
  t.same(traceHeadersOf({ tracestate: 'a=1' }), {}, 'a tracestate alone is no context')
})
