import http, { type ServerResponse } from 'node:http'
import { PassThrough, Readable } from 'node:stream'
import t, { type Test } from 'tap'
import type { UpstreamResponse } from '../../src/backends/port.ts'
import { GatewayError, gatewayError } from '../../src/errors.ts'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { relay, type RelayOptions, type RelayOutcome } from '../../src/proxy/relay.ts'
import { pollUntil } from '../helpers/poll.ts'
import { call, dataOf, open, startGateway } from './gateway-harness.ts'

interface Relayed {
  readonly url: string
  readonly outcome: Promise<RelayOutcome>
}

/** A gateway that relays `upstream` for its one request, after `prepare` set its own headers. */
async function relayVia(
  t: Test,
  upstream: UpstreamResponse,
  options: Partial<RelayOptions> = {},
  prepare?: (res: ServerResponse) => void,
): Promise<Relayed> {
  let settle: (outcome: RelayOutcome) => void = () => undefined
  const outcome = new Promise<RelayOutcome>((resolve) => {
    settle = resolve
  })
  const gateway = await startGateway(async (req, res) => {
    for await (const _ of req) {
      /* drain */
    }
    prepare?.(res)
    settle(
      await relay(res, upstream, {
        stream: false,
        clientWantsUsage: false,
        promptTokens: async () => 42,
        jsonLimitBytes: 1 << 20,
        signal: new AbortController().signal,
        ...options,
      }),
    )
  })
  t.teardown(() => gateway.close())
  return { url: gateway.url, outcome }
}

function upstreamOf(
  status: number,
  headers: Record<string, string>,
  chunks: readonly (string | Buffer)[],
): UpstreamResponse {
  return {
    status,
    headers,
    body: Readable.from(
      chunks.map((c) => Buffer.from(c)),
      { objectMode: false },
    ),
  }
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): UpstreamResponse {
  const bytes = JSON.stringify(body)
  return upstreamOf(
    status,
    { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(bytes)), ...headers },
    [bytes],
  )
}

/** A body the test writes to; like the adapter's, it tolerates an error before anyone reads it. */
function liveBody(): PassThrough {
  const body = new PassThrough()
  body.on('error', () => undefined)
  return body
}

const SSE = { 'content-type': 'text/event-stream; charset=utf-8' }

function chatChunk(content: string | null, extra: Record<string, unknown> = {}): string {
  const choices = content === null ? [] : [{ index: 0, delta: { content }, finish_reason: null }]
  return `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices, ...extra })}\n\n`
}

const USAGE = { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 }
const DELTAS = ['Hello', ' wörld', ' 👋🏽', ' again', '.']
function chatStream(withUsage: boolean, eol = '\n'): string {
  const events = [
    ...DELTAS.map((d) => chatChunk(d, withUsage ? { usage: null } : {})),
    ...(withUsage ? [chatChunk(null, { usage: USAGE })] : []),
    'data: [DONE]\n\n',
  ]
  return events.join('').replaceAll('\n', eol)
}

t.test(
  "JSON: usage taken from prompt_tokens/completion_tokens; body untouched; the gateway's headers win",
  async (t) => {
    const body = {
      id: 'x',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' } }],
      usage: USAGE,
    }
    const upstream = json(200, body, {
      'x-ratelimit-limit-requests': '99999',
      'x-ratelimit-remaining-tokens': '123',
      'x-request-id': 'upstream-id',
      'set-cookie': '__cf_bm=abc',
      'openai-organization': 'org-gateway',
      'openai-processing-ms': '12',
      'x-powered-by': 'Express',
      'x-vendor-trace': 'abc',
    })
    const relayed = await relayVia(t, upstream, {}, (res) => {
      res.setHeader('x-ratelimit-limit-requests', '60')
      res.setHeader('x-request-id', 'req_gateway')
    })
    const reply = await call(relayed.url)
    const outcome = await relayed.outcome
    t.equal(reply.status, 200)
    t.equal(reply.body, JSON.stringify(body))
    t.equal(reply.headers['content-length'], String(Buffer.byteLength(reply.body)))
    t.equal(reply.headers['x-ratelimit-limit-requests'], '60')
    t.notOk(reply.headers['x-ratelimit-remaining-tokens'], "the upstream account's limits are not the client's")
    t.equal(reply.headers['x-request-id'], 'req_gateway')
    t.notOk(reply.headers['set-cookie'])
    t.notOk(reply.headers['openai-organization'])
    t.equal(reply.headers['openai-processing-ms'], '12')
    t.notOk(reply.headers['x-powered-by'], 'only allowed upstream headers pass')
    t.notOk(reply.headers['x-vendor-trace'])
    t.same(outcome.usage, { inputTokens: 11, outputTokens: 5 })
    t.equal(outcome.usageSource, 'reported')
    t.equal(outcome.bytes, Buffer.byteLength(reply.body))
    t.equal(outcome.aborted, false)
    t.type(outcome.firstByteMs, 'number')
  },
)

t.test('JSON: input_tokens/output_tokens naming (responses, images, audio)', async (t) => {
  const relayed = await relayVia(
    t,
    json(200, { object: 'response', output: [], usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10 } }),
  )
  await call(relayed.url)
  const outcome = await relayed.outcome
  t.same(outcome.usage, { inputTokens: 7, outputTokens: 3 })
  t.equal(outcome.usageSource, 'reported')
})

t.test('JSON: embeddings report prompt tokens only', async (t) => {
  const relayed = await relayVia(
    t,
    json(200, { object: 'list', data: [], usage: { prompt_tokens: 9, total_tokens: 9 } }),
  )
  await call(relayed.url)
  t.same((await relayed.outcome).usage, { inputTokens: 9, outputTokens: 0 })
})

t.test('JSON: a generation without usage is counted; other bodies without usage are not', async (t) => {
  const generation = await relayVia(
    t,
    json(200, {
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'one two three' } }],
    }),
  )
  await call(generation.url)
  const counted = await generation.outcome
  t.equal(counted.usageSource, 'counted')
  t.same(counted.usage, { inputTokens: 42, outputTokens: await countTextTokens('one two three') })

  const list = await relayVia(t, json(200, { object: 'list', data: [] }))
  await call(list.url)
  t.equal((await list.outcome).usageSource, 'none')
})

t.test(
  "JSON: an upstream error passes through with its status and no usage, FastAPI's detail added beside it",
  async (t) => {
    const error = { error: { message: 'bad', type: 'invalid_request_error', param: null, code: null } }
    const relayed = await relayVia(t, json(400, error))
    const reply = await call(relayed.url)
    t.equal(reply.status, 400)
    t.same(JSON.parse(reply.body), { ...error, detail: 'bad' })
    const outcome = await relayed.outcome
    t.equal(outcome.status, 400)
    t.equal(outcome.usageSource, 'none')

    // An upstream body that has its own detail, or is not OpenAI's shape, or a success, is left as it is.
    for (const [status, body] of [
      [400, { ...error, detail: 'its own' }],
      [422, { detail: [{ loc: ['body'], msg: 'x' }] }],
      [200, { error: { message: 'not an error status' } }],
    ] as const) {
      const other = await relayVia(t, json(status, body))
      t.same(
        JSON.parse((await call(other.url)).body),
        body,
        `${status} ${JSON.stringify(body).slice(0, 40)}: untouched`,
      )
      await other.outcome
    }
  },
)

t.test("an upstream error whose body is not JSON keeps its status and gets the contract's body", async (t) => {
  const cases: Array<[string, UpstreamResponse, number]> = [
    // Node's own answer to a header section over its limit: no type, no body.
    ['bare 431', upstreamOf(431, { connection: 'close' }, []), 431],
    [
      'HTML page from a proxy',
      upstreamOf(502, { 'content-type': 'text/html' }, ['<html><body>nginx/1.25 at /srv/internal</body></html>']),
      502,
    ],
    ['JSON that does not parse', upstreamOf(500, { 'content-type': 'application/json' }, ['{"detail": ']), 500],
    [
      'a 429 with Retry-After',
      upstreamOf(429, { 'content-type': 'text/plain', 'retry-after': '7' }, ['slow down']),
      429,
    ],
  ]
  for (const [what, upstream, status] of cases) {
    const relayed = await relayVia(t, upstream)
    const reply = await call(relayed.url)
    t.equal(reply.status, status, `${what}: status kept`)
    const body = JSON.parse(reply.body) as { error: { type: string; code: string; message: string; param: null } }
    t.equal(body.error.code, 'upstream_error', `${what}: code`)
    t.equal(body.error.type, status < 500 ? 'invalid_request_error' : 'server_error', `${what}: type`)
    t.match(body.error.message, new RegExp(`answered ${status}`), `${what}: the message names the upstream status`)
    t.same(Object.keys(body).sort(), ['detail', 'error'], `${what}: the gateway's body`)
    t.equal((body as unknown as { detail: string }).detail, body.error.message, `${what}: detail is the message`)
    t.notMatch(body.error.message, /nginx|internal|slow down|detail/, `${what}: nothing of the upstream's text`)
    t.match(reply.headers['content-type'], /application\/json/, `${what}: JSON`)
    if (status === 429) t.equal(reply.headers['retry-after'], '7', 'Retry-After kept')
    const outcome = await relayed.outcome
    t.equal(outcome.status, status)
    t.equal(outcome.usageSource, 'none')
  }
})

t.test('JSON: transformJson decides what the client gets, before it gets it', async (t) => {
  const body = {
    object: 'list',
    data: [
      { id: 'file-mine', owner: 'a' },
      { id: 'file-theirs', owner: 'b' },
    ],
  }
  const seen: unknown[] = []
  const relayed = await relayVia(t, json(200, body, { etag: '"abc"' }), {
    transformJson: async (status, value) => {
      seen.push(status)
      const list = value as typeof body
      return { ...list, data: list.data.filter((f) => f.owner === 'a') }
    },
  })
  const reply = await call(relayed.url)
  t.same(seen, [200])
  t.same(JSON.parse(reply.body), { object: 'list', data: [{ id: 'file-mine', owner: 'a' }] })
  t.equal(reply.headers['content-length'], String(Buffer.byteLength(reply.body)))
  t.notOk(reply.headers.etag, 'an etag of the original bytes does not describe the rewritten body')
})

t.test('JSON: a GatewayError thrown by transformJson is the reply', async (t) => {
  const relayed = await relayVia(t, json(200, { id: 'file-theirs', object: 'file' }), {
    transformJson: async () => {
      throw gatewayError('resource_not_found')
    },
  })
  const reply = await call(relayed.url)
  t.equal(reply.status, 404)
  t.equal((JSON.parse(reply.body) as { error: { code: string } }).error.code, 'not_found')
  t.notMatch(reply.body, /file-theirs/)
  const outcome = await relayed.outcome
  t.equal(outcome.status, 404)
  t.equal(outcome.error?.errorName, 'resource_not_found')
})

t.test(
  'JSON over the limit streams through untouched, its usage read from its last bytes, unless a transform must see it',
  async (t) => {
    const big = { object: 'list', data: Array.from({ length: 200 }, (_, i) => ({ id: `item-${i}` })), usage: USAGE }
    const text = JSON.stringify(big)
    const pieces = [text.slice(0, 1000), text.slice(1000, 3000), text.slice(3000, text.length - 20), text.slice(-20)]
    const passthrough = await relayVia(t, upstreamOf(200, { 'content-type': 'application/json' }, pieces), {
      jsonLimitBytes: 2000,
    })
    const reply = await call(passthrough.url)
    t.equal(reply.body, text)
    const outcome = await passthrough.outcome
    t.equal(outcome.usageSource, 'reported')
    t.same(outcome.usage, { inputTokens: USAGE.prompt_tokens, outputTokens: USAGE.completion_tokens })
    t.equal(outcome.bytes, Buffer.byteLength(text))

    // A usage object that is not the reply's own (deeper in) is not taken for it.
    const nested = JSON.stringify({ object: 'list', data: big.data, last: { usage: USAGE } })
    const deeper = await relayVia(t, upstreamOf(200, { 'content-type': 'application/json' }, [nested]), {
      jsonLimitBytes: 2000,
    })
    t.equal((await call(deeper.url)).body, nested)
    t.equal((await deeper.outcome).usageSource, 'none')

    const checked = await relayVia(t, upstreamOf(200, { 'content-type': 'application/json' }, pieces), {
      jsonLimitBytes: 2000,
      transformJson: async (_status, value) => value,
    })
    const refused = await call(checked.url)
    t.equal(refused.status, 502)
    t.notMatch(refused.body, /item-0/)
  },
)

t.test('JSON that does not parse goes through untouched', async (t) => {
  const relayed = await relayVia(t, upstreamOf(200, { 'content-type': 'application/json' }, ['{"half":']))
  const reply = await call(relayed.url)
  t.equal(reply.body, '{"half":')
  t.equal((await relayed.outcome).usageSource, 'none')
})

t.test('JSON: an upstream that dies before the body is complete becomes an error reply', async (t) => {
  const body = liveBody()
  const relayed = await relayVia(t, { status: 200, headers: { 'content-type': 'application/json' }, body })
  const pending = call(relayed.url)
  body.write('{"id":')
  setImmediate(() => body.destroy(gatewayError('upstream_timeout')))
  const reply = await pending
  t.equal(reply.status, 504)
  t.equal((await relayed.outcome).error?.errorName, 'upstream_timeout')
})

t.test(
  'SSE: a usage: null that is not the last member, or that sits on a data line of its own, is dropped too',
  async (t) => {
    const [first, second, ...rest] = DELTAS
    const payload = (content: string | undefined): Record<string, unknown> => ({
      id: 'c1',
      object: 'chat.completion.chunk',
      choices: [{ index: 0, delta: { content }, finish_reason: null }],
    })
    const upstream = [
      // usage first: no tail to cut, the event is written again without it
      `data: ${JSON.stringify({ usage: null, ...payload(first) })}\n\n`,
      // the JSON spread over two data lines (joined with a newline): never cut as text
      `data: ${JSON.stringify(payload(second)).slice(0, -1)},\ndata: "usage":null}\n\n`,
      ...rest.map((d) => chatChunk(d, { usage: null })),
      chatChunk(null, { usage: USAGE }),
      'data: [DONE]\n\n',
    ].join('')
    const relayed = await relayVia(t, upstreamOf(200, SSE, [upstream]), { stream: true, clientWantsUsage: false })
    const reply = await call(relayed.url)
    t.notMatch(reply.body, /"usage"/, 'no usage field in any event')
    t.same(reply.body, chatStream(false), 'the stream the client would have got without the gateway')
    t.same((await relayed.outcome).usage, { inputTokens: 11, outputTokens: 5 })
  },
)

t.test('SSE: the usage chunk the gateway asked for is hidden from a client that did not ask', async (t) => {
  const relayed = await relayVia(t, upstreamOf(200, SSE, [chatStream(true)]), { stream: true, clientWantsUsage: false })
  const reply = await call(relayed.url)
  const data = dataOf(reply.body)
  t.equal(data.length, DELTAS.length + 1)
  t.equal(data.at(-1), '[DONE]')
  t.notMatch(reply.body, /completion_tokens/)
  t.notMatch(reply.body, /"usage"/, 'nor the usage: null the request for usage added to every chunk')
  t.same(reply.body, chatStream(false), 'the stream the client would have got without the gateway')
  t.equal(reply.headers['content-type'], 'text/event-stream; charset=utf-8')
  t.equal(reply.headers['cache-control'], 'no-cache')
  t.notOk(reply.headers['content-length'])
  const outcome = await relayed.outcome
  t.same(outcome.usage, { inputTokens: 11, outputTokens: 5 })
  t.equal(outcome.usageSource, 'reported')
  t.equal(outcome.bytes, Buffer.byteLength(reply.body))
})

t.test('SSE: a client that asked for usage gets the stream byte for byte', async (t) => {
  const relayed = await relayVia(t, upstreamOf(200, SSE, [chatStream(true)]), { stream: true, clientWantsUsage: true })
  const reply = await call(relayed.url)
  t.equal(reply.body, chatStream(true))
  t.match(dataOf(reply.body).at(-2), /"completion_tokens":5/)
  t.equal((await relayed.outcome).usageSource, 'reported')
})

t.test('SSE: without a usage chunk, output is counted from the deltas and input is the estimate', async (t) => {
  const relayed = await relayVia(t, upstreamOf(200, SSE, [chatStream(false)]), {
    stream: true,
    promptTokens: async () => 31,
  })
  const reply = await call(relayed.url)
  t.equal(reply.body, chatStream(false))
  const outcome = await relayed.outcome
  t.equal(outcome.usageSource, 'counted')
  t.same(outcome.usage, { inputTokens: 31, outputTokens: await countTextTokens(DELTAS.join('')) })
})

t.test('SSE: events cut at odd byte boundaries, CRLF or LF, come out whole and counted the same', async (t) => {
  for (const eol of ['\n', '\r\n']) {
    const bytes = Buffer.from(chatStream(true, eol))
    for (const size of [1, 2, 3, 5, 7, 13]) {
      const chunks: Buffer[] = []
      for (let i = 0; i < bytes.length; i += size) chunks.push(bytes.subarray(i, i + size))
      const relayed = await relayVia(t, upstreamOf(200, SSE, chunks), { stream: true, clientWantsUsage: true })
      const reply = await call(relayed.url)
      const outcome = await relayed.outcome
      t.equal(reply.body, bytes.toString('utf8'), `eol ${JSON.stringify(eol)}, ${size}-byte chunks: identical`)
      t.same(outcome.usage, { inputTokens: 11, outputTokens: 5 })

      const hidden = await relayVia(t, upstreamOf(200, SSE, chunks), { stream: true, clientWantsUsage: false })
      const hiddenReply = await call(hidden.url)
      t.equal(
        dataOf(hiddenReply.body).length,
        DELTAS.length + 1,
        `eol ${JSON.stringify(eol)}, ${size}-byte chunks: usage chunk dropped whole`,
      )
    }
  }
})

t.test('SSE: comments, multi-line data and a CR-only stream are handled', async (t) => {
  const stream = [
    ': keepalive\n\n',
    'event: message\ndata: {"choices":[{"index":0,\ndata: "delta":{"content":"split"}}]}\n\n',
    ':another comment\r',
    '\rdata: {"choices":[{"index":0,"delta":{"content":" lines"}}]}\r\r',
    'data: [DONE]\n\n',
  ].join('')
  const relayed = await relayVia(t, upstreamOf(200, SSE, [stream]), { stream: true })
  const reply = await call(relayed.url)
  t.equal(reply.body, stream, 'forwarded verbatim')
  const outcome = await relayed.outcome
  t.equal(outcome.usageSource, 'counted')
  t.equal(outcome.usage.outputTokens, await countTextTokens('split lines'))
})

t.test('SSE: the responses API reports usage on response.completed, which is never hidden', async (t) => {
  const events = [
    { type: 'response.created', response: { id: 'r', usage: null } },
    { type: 'response.output_text.delta', delta: 'Hi' },
    { type: 'response.output_text.delta', delta: ' there' },
    {
      type: 'response.completed',
      response: { id: 'r', usage: { input_tokens: 8, output_tokens: 2, total_tokens: 10 } },
    },
  ]
  const stream = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('')
  const relayed = await relayVia(t, upstreamOf(200, SSE, [stream]), { stream: true, clientWantsUsage: false })
  const reply = await call(relayed.url)
  t.equal(reply.body, stream)
  t.same((await relayed.outcome).usage, { inputTokens: 8, outputTokens: 2 })
})

t.test('SSE: headers are flushed before the first event arrives', async (t) => {
  const body = liveBody()
  const relayed = await relayVia(t, { status: 200, headers: SSE, body }, { stream: true })
  const { res } = await open(relayed.url)
  t.equal(res.statusCode, 200, 'headers arrived while the upstream had sent nothing')
  body.end(chatStream(false))
  for await (const _ of res) {
    /* drain */
  }
  t.equal((await relayed.outcome).usageSource, 'counted')
})

t.test(
  'SSE: a client that leaves mid-stream stops the relay, frees the upstream and is charged for what streamed',
  async (t) => {
    const body = liveBody()
    const relayed = await relayVia(
      t,
      { status: 200, headers: SSE, body },
      { stream: true, promptTokens: async () => 20 },
    )
    const { req, res } = await open(relayed.url)
    body.write(chatChunk('Hello'))
    body.write(chatChunk(' there'))
    let received = ''
    for await (const chunk of res as AsyncIterable<Buffer>) {
      received += chunk.toString('utf8')
      if (dataOf(received).length >= 2) break
    }
    req.destroy()
    const outcome = await relayed.outcome
    t.equal(outcome.aborted, true)
    t.equal(outcome.usageSource, 'counted')
    t.same(outcome.usage, { inputTokens: 20, outputTokens: await countTextTokens('Hello there') })
    t.equal(body.destroyed, true, 'the upstream body was destroyed')
  },
)

t.test("SSE: the gateway's signal stops the relay the same way", async (t) => {
  const body = liveBody()
  const controller = new AbortController()
  const relayed = await relayVia(t, { status: 200, headers: SSE, body }, { stream: true, signal: controller.signal })
  const { res } = await open(relayed.url)
  body.write(chatChunk('Hello'))
  await new Promise((resolve) => res.once('data', resolve))
  controller.abort()
  const outcome = await relayed.outcome
  t.equal(outcome.aborted, true)
  t.equal(outcome.usage.outputTokens, await countTextTokens('Hello'))
  t.equal(body.destroyed, true)
  res.destroy()
})

t.test('SSE: an upstream that dies mid-stream ends the client stream with an error event', async (t) => {
  const body = liveBody()
  const relayed = await relayVia(t, { status: 200, headers: SSE, body }, { stream: true })
  const { res } = await open(relayed.url)
  let received = ''
  let truncated = false
  const whole = (async () => {
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) received += chunk.toString('utf8')
    } catch {
      truncated = true
    }
  })()
  body.write(chatChunk('Partial'))
  // The upstream dies once the first event has reached the client (a destroyed body drops
  // what it still buffers), in the middle of the next one.
  t.ok(
    (
      await pollUntil(
        async () => received,
        (text) => text.includes('Partial'),
      )
    ).met,
    'the first event arrived',
  )
  body.write('data: {"choices":[{"ind')
  body.destroy(gatewayError('upstream_timeout'))
  await whole
  t.equal(truncated, false, 'the client stream ends cleanly')
  const data = dataOf(received)
  t.equal(data.length, 2, 'the half event is not forwarded')
  const last = JSON.parse(data.at(-1) ?? '{}') as { error?: { code: string } }
  t.equal(last.error?.code, 'upstream_timeout')
  const outcome = await relayed.outcome
  t.equal(outcome.error?.errorName, 'upstream_timeout')
  t.equal(outcome.aborted, false)
  t.same(outcome.usage, { inputTokens: 42, outputTokens: await countTextTokens('Partial') })
})

t.test('SSE: an error status carried as a stream is charged nothing', async (t) => {
  const relayed = await relayVia(t, upstreamOf(500, SSE, ['data: {"error":{"message":"boom"}}\n\n']), { stream: true })
  const reply = await call(relayed.url)
  t.equal(reply.status, 500)
  t.equal((await relayed.outcome).usageSource, 'none')
})

t.test('other content goes through untouched with its length and no usage', async (t) => {
  const relayed = await relayVia(
    t,
    upstreamOf(200, { 'content-type': 'text/plain', 'content-length': '11' }, ['hello', ' world']),
  )
  const reply = await call(relayed.url)
  t.equal(reply.body, 'hello world')
  t.equal(reply.headers['content-type'], 'text/plain')
  t.equal(reply.headers['content-length'], '11')
  const outcome = await relayed.outcome
  t.equal(outcome.usageSource, 'none')
  t.equal(outcome.bytes, 11)
})

t.test('a compressed body is not tapped but passed with its encoding', async (t) => {
  const relayed = await relayVia(
    t,
    upstreamOf(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }, ['\x1f\x8b not really']),
  )
  const reply = await call(relayed.url)
  t.equal(reply.headers['content-encoding'], 'gzip')
  t.equal((await relayed.outcome).usageSource, 'none')
})

t.test('other content cut off by the upstream cuts the client connection', async (t) => {
  const body = liveBody()
  const relayed = await relayVia(t, { status: 200, headers: { 'content-type': 'audio/mpeg' }, body })
  // The headers go out with the first bytes.
  const opening = open(relayed.url)
  body.write(Buffer.alloc(1000, 1))
  const { res } = await opening
  let received = 0
  let truncated = false
  const whole = (async () => {
    try {
      for await (const chunk of res as AsyncIterable<Buffer>) received += chunk.length
    } catch {
      truncated = true
    }
  })()
  // The upstream breaks off once the client has the first bytes.
  t.ok(
    (
      await pollUntil(
        async () => received,
        (n) => n >= 1000,
      )
    ).met,
    'the first bytes arrived',
  )
  body.destroy(new Error('socket hang up'))
  await whole
  t.equal(truncated, true)
  const outcome = await relayed.outcome
  t.ok(outcome.error instanceof GatewayError)
  t.equal(outcome.error?.errorName, 'upstream_bad_response')
})

t.test('a client already gone before the relay starts: nothing written, upstream freed', async (t) => {
  const body = liveBody()
  const controller = new AbortController()
  controller.abort()
  const relayed = await relayVia(
    t,
    { status: 200, headers: SSE, body },
    { stream: true, signal: controller.signal, promptTokens: async () => 5 },
  )
  const reply = await call(relayed.url).catch(() => undefined)
  t.equal(reply?.body ?? '', '')
  const outcome = await relayed.outcome
  t.equal(outcome.aborted, true)
  t.equal(outcome.bytes, 0)
  t.same(outcome.usage, { inputTokens: 5, outputTokens: 0 })
  t.equal(body.destroyed, true)
})

t.test('JSON: a client that leaves before the body is read whole is charged the estimated input', async (t) => {
  const body = liveBody()
  const relayed = await relayVia(
    t,
    { status: 200, headers: { 'content-type': 'application/json' }, body },
    { promptTokens: async () => 13 },
  )
  const req = http.request(relayed.url, { method: 'POST', agent: false })
  req.on('error', () => undefined)
  req.end()
  body.write('{"id":"chatcmpl-1",')
  // Wait until the relay is reading the body, then leave.
  for (let i = 0; i < 200 && body.listenerCount('readable') === 0; i++) await new Promise((r) => setTimeout(r, 5))
  t.ok(body.listenerCount('readable') > 0, 'the relay is reading')
  req.destroy()
  const outcome = await relayed.outcome
  t.equal(outcome.aborted, true)
  t.equal(outcome.usageSource, 'counted')
  t.same(outcome.usage, { inputTokens: 13, outputTokens: 0 })
  t.equal(body.destroyed, true)
})

t.test('publicModel: the client sees the name it asked for, in JSON and in every stream event', async (t) => {
  const body = { id: 'x', object: 'chat.completion', model: 'org/internal-7b', choices: [], usage: USAGE }
  const relayedJson = await relayVia(t, json(200, body), { publicModel: 'public-7b' })
  const reply = await call(relayedJson.url)
  t.equal((JSON.parse(reply.body) as { model: string }).model, 'public-7b')
  t.equal(reply.headers['content-length'], String(Buffer.byteLength(reply.body)))
  t.notMatch(reply.body, /internal-7b/)
  t.same((await relayedJson.outcome).usage, { inputTokens: 11, outputTokens: 5 })

  const stream = [
    `data: ${JSON.stringify({ object: 'chat.completion.chunk', model: 'org/internal-7b', choices: [{ index: 0, delta: { content: 'Hi' } }] })}\n\n`,
    `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response: { model: 'org/internal-7b', usage: { input_tokens: 2, output_tokens: 1 } } })}\n\n`,
    `data: ${JSON.stringify({ object: 'chat.completion.chunk', model: 'public-7b', choices: [] })}\n\n`,
    'data: [DONE]\n\n',
  ]
  const relayedSse = await relayVia(t, upstreamOf(200, SSE, [stream.join('')]), {
    stream: true,
    publicModel: 'public-7b',
  })
  const sse = await call(relayedSse.url)
  t.notMatch(sse.body, /internal-7b/)
  const data = dataOf(sse.body)
  t.equal(data.length, 4)
  t.equal((JSON.parse(data[0] ?? '{}') as { model: string }).model, 'public-7b')
  t.match(sse.body, /event: response\.completed\ndata: .*"model":"public-7b"/)
  t.ok(sse.body.includes(stream[2] ?? '-'), 'an event already right passes byte for byte')
  t.same((await relayedSse.outcome).usage, { inputTokens: 2, outputTokens: 1 })
})

t.test('publicModel and transformJson: the transform sees the public name', async (t) => {
  let seen: unknown
  const relayed = await relayVia(t, json(200, { object: 'fine_tuning.job', id: 'ftjob-1', model: 'org/internal-7b' }), {
    publicModel: 'public-7b',
    transformJson: async (_status, value) => {
      seen = value
      return undefined
    },
  })
  const reply = await call(relayed.url)
  t.equal((seen as { model: string }).model, 'public-7b')
  t.equal(
    (JSON.parse(reply.body) as { model: string }).model,
    'public-7b',
    'undefined from the transform keeps the renamed body',
  )
})
