// Ways a client might try to get more than its plan, each of which must stay within it:
// requests abandoned at once, the model's name in another case or with spaces, n > 1 and
// best_of (and batches of prompts), streams against non-streams, and the same model
// through another endpoint. The gateway's upstream is a separate process that records
// every call it gets, so "within the plan" is checked where it matters: what reached it.
import { connect } from 'node:net'
import OpenAI from 'openai'
import t from 'tap'
import { loadEncoder } from '../../src/tokenizer/tokens.ts'
import { countInPieces } from '../../src/tokenizer/chunked-count.ts'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { rejectsWith } from '../helpers/assert.ts'
import { request } from '../helpers/http.ts'

const MODELS = ['m-abort', 'm-case', 'm-n', 'm-stream', 'm-multi'] as const
type Model = (typeof MODELS)[number]

let upstream: UpstreamProcess
let gw: RunningTollgate

t.before(async () => {
  upstream = await startUpstream(['--tokens-per-second', '5000'])
  gw = await startTollgate({
    config: (doc) => {
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      doc.models = [
        ...MODELS.map((name) => ({ name, kind: 'chat', deployments: [{ backend: 'up' }] })),
        { name: 'e-embed', kind: 'embedding', deployments: [{ backend: 'up' }] },
      ]
      // No limits but the key's own, so each test sets exactly what it checks.
      doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {} } } }
    },
  })
})
t.teardown(async () => {
  await gw.stop()
  await upstream.stop()
})

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
const reachedUpstream = async (model: Model): Promise<number> =>
  (await upstream.requests()).filter((r) => r.model === model).length

async function keyFor(
  model: Model,
  limits: Record<string, number>,
): Promise<{ key: string; id: string; client: OpenAI }> {
  const created = await gw.createKey({ limits: { [model]: limits } })
  return { ...created, client: new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: created.key, maxRetries: 0 }) }
}

/** The key's metered totals for a model, once the meter has written them. */
async function metered(
  id: string,
  model: Model,
): Promise<{ requests: number; input_tokens: number; output_tokens: number }> {
  const res = await request(`${gw.url}/admin/keys/${id}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  const rows = res.json<{
    by_model: Array<{ model: string; requests: number; input_tokens: number; output_tokens: number }>
  }>().by_model
  return rows.find((r) => r.model === model) ?? { requests: 0, input_tokens: 0, output_tokens: 0 }
}

async function chat(
  key: string,
  body: Record<string, unknown>,
  path = '/v2/chat/completions',
): Promise<{ status: number; headers: Headers; body: string }> {
  const res = await request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return { status: res.status, headers: res.headers, body: res.text }
}

t.test(
  'requests abandoned at once: never more than rpm reach the upstream, and each that did is metered',
  async (t) => {
    const model: Model = 'm-abort'
    const { key, id } = await keyFor(model, { rpm: 5 })
    const port = Number(new URL(gw.url).port)
    const abandon = (i: number): Promise<void> =>
      new Promise((done) => {
        const body = JSON.stringify({
          model,
          messages: [{ role: 'user', content: `abandon ${i}` }],
          max_tokens: 200,
          stream: i % 2 === 0,
        })
        const wire = `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
        const socket = connect(port, '127.0.0.1', () => {
          // Some leave mid-body, some right after sending, some a moment later.
          if (i % 3 === 0) socket.write(wire + body.slice(0, 10))
          else socket.write(wire + body)
          setTimeout(
            () => {
              socket.destroy()
              done()
            },
            i % 3 === 2 ? 5 + (i % 7) : 0,
          )
        })
        socket.on('error', () => done())
      })
    await Promise.all(Array.from({ length: 60 }, (_, i) => abandon(i)))
    await sleep(500)

    let served = 0
    let refused = 0
    for (let i = 0; i < 8; i++) {
      const res = await chat(key, { model, messages: [{ role: 'user', content: 'now for real' }], max_tokens: 10 })
      if (res.status === 200) served++
      else if (res.status === 429) refused++
    }
    const reached = await reachedUpstream(model)
    const usage = await metered(id, model)
    t.ok(refused > 0, `the key still runs out (${served} served, ${refused} refused after the abandoned ones)`)
    t.ok(reached <= 5, `at most rpm calls reached the upstream: ${reached}`)
    t.ok(usage.requests <= 5, `at most rpm calls were admitted and metered: ${usage.requests}`)
    t.ok(usage.requests >= reached, 'every call that reached the upstream is metered')
  },
)

t.test(
  'the model name in another case, with spaces or look-alike characters: 404, never a counter of its own',
  async (t) => {
    const model: Model = 'm-case'
    const { key, id } = await keyFor(model, { rpm: 3 })
    for (let i = 0; i < 3; i++)
      t.equal((await chat(key, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })).status, 200)
    for (const variant of [
      'M-CASE',
      'M-case',
      'm-Case',
      ' m-case',
      'm-case ',
      'm-case\n',
      '\tm-case',
      'm\u200b-case',
      'ｍ-case',
      'm-case\u0000',
    ]) {
      const res = await chat(key, { model: variant, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })
      t.equal(res.status, 404, `${JSON.stringify(variant)}: 404`)
      t.equal((JSON.parse(res.body) as { error: { code: string } }).error.code, 'model_not_found')
    }
    t.equal(
      (await chat(key, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 })).status,
      429,
      'the real name is still used up',
    )
    t.equal(await reachedUpstream(model), 3, 'only the 3 calls under the real name reached the upstream')
    t.equal((await metered(id, model)).requests, 3)
  },
)

t.test('n > 1, best_of and batches of prompts reserve everything they may generate', async (t) => {
  const model: Model = 'm-n'
  const { key, id } = await keyFor(model, { output_tpm: 2000, rpm: 1000 })
  const never = await chat(key, { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 600, n: 4 })
  t.equal(never.status, 429, 'chat: 4 × 600 can never fit in 2000')
  t.match(never.body, /can never fit/)
  t.equal(
    (await chat(key, { model, prompt: 'hi', max_tokens: 450, best_of: 5 }, '/v2/completions')).status,
    429,
    'completions: best_of 5 × 450 neither',
  )
  t.equal(
    (await chat(key, { model, prompt: ['a', 'b', 'c', 'd', 'e'], max_tokens: 450 }, '/v2/completions')).status,
    429,
    'completions: 5 prompts × 450 neither',
  )
  t.equal(
    (
      await chat(key, {
        model,
        messages: [{ role: 'user', content: 'hi' }],
        max_completion_tokens: 10,
        max_tokens: 3000,
      })
    ).status,
    429,
    'max_tokens larger than max_completion_tokens: the larger is reserved',
  )
  for (const [field, value] of [
    ['n', '8'],
    ['n', 0],
    ['n', 2.5],
    ['best_of', '3'],
    ['best_of', -1],
  ] as const) {
    const res = await chat(key, { model, prompt: 'hi', max_tokens: 5, [field]: value }, '/v2/completions')
    t.equal(res.status, 400, `${field}: ${JSON.stringify(value)} is refused, not read as 1`)
  }
  t.equal(await reachedUpstream(model), 0, 'none of those reached the upstream')

  // A random mix: whatever is admitted, the window's output stays within output_tpm.
  let generated = 0
  const others: number[] = []
  const random = (n: number): number => 1 + Math.floor(Math.random() * n)
  for (let i = 0; i < 30; i++) {
    const n = random(3)
    const res =
      i % 2 === 0
        ? await chat(key, { model, messages: [{ role: 'user', content: `go ${i}` }], max_tokens: random(150), n })
        : await chat(
            key,
            {
              model,
              prompt: Array.from({ length: random(2) }, (_, j) => `p${j}`),
              max_tokens: random(100),
              n,
              best_of: n + random(2) - 1,
            },
            '/v2/completions',
          )
    if (res.status === 200)
      generated += (JSON.parse(res.body) as { usage: { completion_tokens: number } }).usage.completion_tokens
    else if (res.status !== 429) others.push(res.status)
  }
  t.same(others, [], 'each call was admitted or refused, nothing else')
  const usage = await metered(id, model)
  t.ok(generated > 0, `some were admitted (${usage.requests} calls, ${generated} tokens)`)
  t.equal(usage.output_tokens, generated, 'metered what the upstream generated')
  t.ok(usage.output_tokens <= 2000, `within output_tpm: ${usage.output_tokens} ≤ 2000`)
})

t.test('streams and non-streams share one counter, and a stream costs what it streamed', async (t) => {
  const model: Model = 'm-stream'
  const { id, client } = await keyFor(model, { rpm: 6 })
  const encoder = await loadEncoder()
  let received = 0
  for (let i = 0; i < 6; i++) {
    const messages = [{ role: 'user' as const, content: `call ${i}` }]
    if (i % 3 === 0) {
      const reply = await client.chat.completions.create({ model, messages, max_tokens: 40 })
      received += reply.usage?.completion_tokens ?? 0
    } else {
      const usageAsked = i % 3 === 1
      let text = ''
      let reported: number | undefined
      for await (const chunk of await client.chat.completions.create({
        model,
        messages,
        max_tokens: 40,
        stream: true,
        ...(usageAsked ? { stream_options: { include_usage: true } } : {}),
      })) {
        text += chunk.choices[0]?.delta?.content ?? ''
        if (chunk.usage) reported = chunk.usage.completion_tokens
      }
      received += reported ?? countInPieces(encoder, [text], Infinity).tokens
    }
  }
  await rejectsWith(
    t,
    client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'one more' }],
      max_tokens: 5,
      stream: true,
    }),
    429,
    'the seventh, a stream, is refused',
  )
  await rejectsWith(
    t,
    client.chat.completions.create({ model, messages: [{ role: 'user', content: 'one more' }], max_tokens: 5 }),
    429,
    'and so is a non-stream',
  )
  const usage = await metered(id, model)
  t.equal(usage.requests, 6)
  t.equal(usage.output_tokens, received, `charged the ${received} tokens the client received`)
  t.equal(await reachedUpstream(model), 6)
})

t.test('the same model through chat completions, completions and responses: one set of counters', async (t) => {
  const model: Model = 'm-multi'
  const { key, id } = await keyFor(model, { rpm: 6 })
  const calls = [
    () => chat(key, { model, messages: [{ role: 'user', content: 'a' }], max_tokens: 5 }),
    () => chat(key, { model, prompt: 'b', max_tokens: 5 }, '/v2/completions'),
    () => chat(key, { model, input: 'c', max_output_tokens: 16 }, '/v2/responses'),
  ]
  const remaining: string[] = []
  for (let i = 0; i < 6; i++) {
    const res = await calls[i % 3]!()
    t.equal(res.status, 200, `call ${i + 1}`)
    remaining.push(res.headers.get('x-ratelimit-remaining-requests') ?? '')
  }
  t.same(remaining, ['5', '4', '3', '2', '1', '0'], 'remaining-requests counts down across the endpoints')
  for (const call of calls) t.equal((await call()).status, 429, 'every endpoint is refused once the model is used up')
  const embed = await chat(key, { model, input: 'd' }, '/v2/embeddings')
  t.equal(embed.status, 404, 'a chat model through the embeddings endpoint is not a way around it')
  t.equal((await metered(id, model)).requests, 6)
  t.equal(await reachedUpstream(model), 6)
})
