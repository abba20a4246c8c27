// What a deployment is sent for a call (src/inference/upstream-request.ts): the model
// renamed to the deployment's own, usage asked for on streams that need it, everything
// else as the client sent it, and the client's body left untouched.
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Readable } from 'node:stream'
import t from 'tap'
import type { MultipartBody, RequestBody } from '../../src/http/body.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from '../../src/inference/endpoints.ts'
import {
  streamAskOf,
  translate,
  upstreamBodyOf,
  upstreamPathOf,
  type UpstreamCall,
} from '../../src/inference/upstream-request.ts'

const spec = (endpoint: string, route?: string): EndpointSpec => {
  const found = PROXIED_ENDPOINTS.find((s) => s.endpoint === endpoint && (route === undefined || s.route === route))
  if (found === undefined) throw new Error(`no endpoint ${endpoint}`)
  return found
}
const json = (value: Record<string, unknown>): RequestBody => ({ kind: 'json', value })
/** A deployment on an OpenAI-compatible upstream that knows the model as `upstreamModel`. */
const openai = (upstreamModel: string | null) => ({ upstreamModel, adapter: { type: 'openai' as const } })
const form = (fields: Record<string, string>): MultipartBody => ({
  kind: 'multipart',
  fields,
  files: [],
  contentType: 'multipart/form-data; boundary=x',
  size: 0,
  open: () => Readable.from([]),
  dispose: async () => undefined,
})

t.test('a stream is what the endpoint can do and the body asks for', async (t) => {
  t.same(streamAskOf(spec('chat.completions'), json({ stream: true })), { stream: true, clientWantsUsage: false })
  t.same(streamAskOf(spec('chat.completions'), json({ stream: true, stream_options: { include_usage: true } })), {
    stream: true,
    clientWantsUsage: true,
  })
  t.same(
    streamAskOf(spec('chat.completions'), json({ stream: 'true' })),
    { stream: false, clientWantsUsage: false },
    'only the JSON true',
  )
  t.same(
    streamAskOf(spec('chat.completions'), json({ stream_options: { include_usage: true } })),
    { stream: false, clientWantsUsage: false },
    'usage without a stream asks nothing',
  )
  t.same(
    streamAskOf(spec('embeddings'), json({ stream: true })),
    { stream: false, clientWantsUsage: false },
    'an endpoint that cannot stream',
  )
  t.same(
    streamAskOf(spec('audio.transcriptions'), form({ stream: 'true' })),
    { stream: true, clientWantsUsage: false },
    'a form says it as the text "true"',
  )
  t.same(streamAskOf(spec('audio.transcriptions'), form({ stream: 'false' })), {
    stream: false,
    clientWantsUsage: false,
  })
  t.same(streamAskOf(spec('files.list', '/files'), { kind: 'none' }), { stream: false, clientWantsUsage: false })
})

t.test('the upstream path carries the client query', async (t) => {
  t.equal(upstreamPathOf(spec('chat.completions'), {}, new URLSearchParams()), '/chat/completions')
  t.equal(
    upstreamPathOf(spec('files.list', '/files'), {}, new URLSearchParams({ purpose: 'batch', limit: '2' })),
    '/files?purpose=batch&limit=2',
  )
  t.equal(
    upstreamPathOf(spec('files.list', '/files/:id'), { id: 'file-abc' }, new URLSearchParams()),
    '/files/file-abc',
  )
})

t.test('the model becomes the deployment’s name for it', async (t) => {
  const body = json({ model: 'public-name', messages: [] })
  t.same(
    upstreamBodyOf('chat.completions', body, 'upstream-name', false),
    json({ model: 'upstream-name', messages: [] }),
  )
  t.same(
    upstreamBodyOf('chat.completions', body, null, false),
    body,
    'a deployment without a name of its own keeps the client’s',
  )
  t.same(
    upstreamBodyOf('embeddings', json({ input: 'x' }), 'upstream-name', false),
    json({ input: 'x' }),
    'no model field: none added',
  )
  t.same(body, json({ model: 'public-name', messages: [] }), 'the client’s body is not changed')
})

t.test('a stream of chat or completions asks for usage, keeping the client’s stream_options', async (t) => {
  const asked = upstreamBodyOf('chat.completions', json({ model: 'm', stream: true }), null, true)
  t.same(asked, json({ model: 'm', stream: true, stream_options: { include_usage: true } }))
  const kept = upstreamBodyOf(
    'completions',
    json({ model: 'm', stream: true, stream_options: { include_obfuscation: false, include_usage: false } }),
    null,
    true,
  )
  t.same(kept, json({ model: 'm', stream: true, stream_options: { include_obfuscation: false, include_usage: true } }))
  t.same(
    upstreamBodyOf('chat.completions', json({ stream: true, stream_options: null }), null, true),
    json({ stream: true, stream_options: { include_usage: true } }),
  )
  t.same(
    upstreamBodyOf('responses', json({ model: 'm', stream: true }), null, true),
    json({ model: 'm', stream: true }),
    'responses report usage on their own',
  )
  t.same(
    upstreamBodyOf('chat.completions', json({ model: 'm' }), null, false),
    json({ model: 'm' }),
    'not a stream: nothing asked',
  )
  t.same(
    Object.keys((asked as { value: object }).value),
    ['model', 'stream', 'stream_options'],
    'fields keep their order',
  )
})

t.test('a body read from the client goes as its bytes, patched where a member changes', async (t) => {
  const sent = (text: string): RequestBody => {
    const value = JSON.parse(text) as Record<string, unknown>
    // Members at every depth, as the body reader counts them (none of these has an array of objects).
    const members = (v: unknown): number =>
      typeof v === 'object' && v !== null ? Object.values(v).reduce<number>((n, c) => n + 1 + members(c), 0) : 0
    return { kind: 'json', value, received: { bytes: Buffer.from(text), members: members(value) } }
  }
  const wire = (body: RequestBody): string | undefined =>
    body.kind === 'json' ? body.wire?.toString('utf8') : undefined

  const plain = sent('{ "model": "m",  "messages": [] }')
  const same = upstreamBodyOf('chat.completions', plain, 'm', false)
  t.equal(wire(same), '{ "model": "m",  "messages": [] }', 'nothing to change: the bytes as sent')
  t.equal(same.kind === 'json' && same.wire, plain.kind === 'json' && plain.received?.bytes, 'not even copied')
  t.equal(
    wire(upstreamBodyOf('chat.completions', plain, 'upstream-m', false)),
    '{ "model": "upstream-m",  "messages": [] }',
  )
  t.equal(
    wire(upstreamBodyOf('chat.completions', sent('{"model":"m","stream":true}'), null, true)),
    '{"model":"m","stream":true,"stream_options":{"include_usage":true}}',
  )
  t.equal(
    wire(
      upstreamBodyOf(
        'chat.completions',
        sent('{"stream":true,"stream_options":{"include_usage":false},"n":1}'),
        null,
        true,
      ),
    ),
    '{"stream":true,"stream_options":{"include_usage":true},"n":1}',
  )
  const asked = sent('{"stream":true,"stream_options":{"include_usage":true}}')
  t.equal(
    wire(upstreamBodyOf('chat.completions', asked, null, true)),
    '{"stream":true,"stream_options":{"include_usage":true}}',
    'usage asked for already',
  )
  const dup = '{"model":"m","model":"n"}'
  const twice: RequestBody = {
    kind: 'json',
    value: JSON.parse(dup) as Record<string, unknown>,
    received: { bytes: Buffer.from(dup), members: 1 },
  }
  const out = upstreamBodyOf('chat.completions', twice, 'up', false)
  t.equal(wire(out), undefined, 'a duplicated member: serialised, not forwarded')
  t.same(out.kind === 'json' && out.value, { model: 'up' })
  t.equal(
    wire(upstreamBodyOf('chat.completions', json({ model: 'm' }), 'up', false)),
    undefined,
    'a body not read from a client is serialised',
  )
})

t.test('a form or no body goes as it came', async (t) => {
  const multipart = form({ model: 'whisper', stream: 'true' })
  t.equal(upstreamBodyOf('audio.transcriptions', multipart, 'upstream-whisper', true), multipart)
  const none: RequestBody = { kind: 'none' }
  t.equal(upstreamBodyOf('files.list', none, null, false), none)
})

t.test('translate fills in the deployment, one request per deployment tried', async (t) => {
  const signal = new AbortController().signal
  const client = { req: {} as IncomingMessage, res: {} as ServerResponse }
  const call: UpstreamCall = {
    endpoint: 'chat.completions',
    method: 'POST',
    path: '/chat/completions',
    body: json({ model: 'public', stream: true }),
    stream: true,
    requestId: 'req_1',
    signal,
    client,
  }
  const first = translate(call, openai('deployment-a'))
  const second = translate(call, openai(null))
  t.match(first, {
    endpoint: 'chat.completions',
    method: 'POST',
    path: '/chat/completions',
    model: 'deployment-a',
    requestId: 'req_1',
  })
  t.equal(first.signal, signal)
  t.equal(first.client, client)
  t.same(first.body, json({ model: 'deployment-a', stream: true, stream_options: { include_usage: true } }))
  t.same(second.body, json({ model: 'public', stream: true, stream_options: { include_usage: true } }))
  t.equal(second.model, null)
})

t.test("a call without a cap is sent the one it holds, in its endpoint's member; a mock is not", async (t) => {
  const signal = new AbortController().signal
  const client = { req: {} as IncomingMessage, res: {} as ServerResponse }
  const call = (endpoint: UpstreamCall['endpoint'], value: Record<string, unknown>): UpstreamCall => ({
    endpoint,
    method: 'POST',
    path: '/x',
    body: json(value),
    stream: false,
    requestId: 'req_1',
    signal,
    client,
  })
  const bodyOf = (request: ReturnType<typeof translate>): unknown => request.body.kind === 'json' && request.body.value
  t.same(bodyOf(translate(call('chat.completions', { model: 'm', n: 2 }), openai(null), 300)), {
    model: 'm',
    n: 2,
    max_tokens: 300,
  })
  t.same(bodyOf(translate(call('completions', { model: 'm' }), openai(null), 300)), { model: 'm', max_tokens: 300 })
  t.same(bodyOf(translate(call('responses', { model: 'm' }), openai(null), 300)), {
    model: 'm',
    max_output_tokens: 300,
  })
  t.same(
    bodyOf(translate(call('chat.completions', { model: 'm', max_tokens: null }), openai(null), 300)),
    { model: 'm', max_tokens: 300 },
    'a null cap is no cap',
  )
  t.same(
    bodyOf(translate(call('chat.completions', { model: 'm', max_completion_tokens: 50 }), openai(null))),
    { model: 'm', max_completion_tokens: 50 },
    "the client's own cap: untouched, nothing added",
  )
  t.same(
    bodyOf(
      translate(call('chat.completions', { model: 'm' }), { upstreamModel: null, adapter: { type: 'mock' } }, 300),
    ),
    { model: 'm' },
    'the mock',
  )
  t.same(
    bodyOf(translate(call('embeddings', { model: 'm' }), openai(null), 300)),
    { model: 'm' },
    'an endpoint without one',
  )
})

t.test("the private member of an Anthropic caller's request reaches an anthropic backend only", async (t) => {
  const carried = { effort: 'low', context_management: { edits: [] } }
  const call: UpstreamCall = {
    endpoint: 'chat.completions',
    method: 'POST',
    path: '/chat/completions',
    body: json({ model: 'm', reasoning_effort: 'low', tollgate_anthropic: carried }),
    stream: false,
    requestId: 'req_1',
    signal: new AbortController().signal,
    client: { req: {} as IncomingMessage, res: {} as ServerResponse },
  }
  const to = (type: 'anthropic' | 'openai' | 'mock' | 'bedrock' | 'gemini'): unknown => {
    const sent = translate(call, { upstreamModel: null, adapter: { type } }).body
    return sent.kind === 'json' && sent.value
  }
  t.same(to('anthropic'), { model: 'm', reasoning_effort: 'low', tollgate_anthropic: carried })
  for (const type of ['openai', 'mock', 'bedrock', 'gemini'] as const)
    t.same(to(type), { model: 'm', reasoning_effort: 'low' }, `${type}: without it`)
  t.ok(call.body.kind === 'json' && 'tollgate_anthropic' in call.body.value, "the call's own body is unchanged")
})
