// The official openai SDK against the gateway's 429s, on a short window: its automatic
// retry waits as long as retry-after-ms says (and so succeeds on its one retry), and it
// does not retry what can never succeed (x-should-retry: false).
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
// Short enough that the SDK's retry waits little, long enough that the first three calls
// land in one window on a loaded 2-core machine (at 3 s a run at load 12 saw the window
// roll over before the third call: 200, 200, 200).
const WINDOW_MS = 10_000

let gw: RunningTollgate
t.before(async () => {
  gw = await startTollgate({
    config: (doc) => {
      doc.limits = { windowMs: WINDOW_MS }
    },
  })
})
t.teardown(() => gw.stop())

interface Seen {
  readonly status: number
  readonly remaining: string | null
  readonly retryAfterMs: string | null
}

/** An SDK client that records every HTTP exchange it makes. */
function recordingClient(key: string, maxRetries: number): { client: OpenAI; seen: Seen[] } {
  const seen: Seen[] = []
  const client = new OpenAI({
    apiKey: key,
    baseURL: `${gw.url}/v2`,
    maxRetries,
    fetch: async (url, init) => {
      const res = await fetch(url, init)
      seen.push({
        status: res.status,
        remaining: res.headers.get('x-ratelimit-remaining-requests'),
        retryAfterMs: res.headers.get('retry-after-ms'),
      })
      return res
    },
  })
  return { client, seen }
}

const ask = (client: OpenAI, maxTokens = 5): Promise<OpenAI.Chat.Completions.ChatCompletion> =>
  client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens })

t.test('the SDK retries a 429 after retry-after-ms and gets through on its single retry', async (t) => {
  const { key } = await gw.createKey({ tier: 'Basic', limits: { [MODEL]: { rpm: 2 } } })
  // One retry only: the SDK's own backoff (~0.5 s) would land inside the window and
  // fail again; only waiting as our header says gets through.
  const { client, seen } = recordingClient(key, 1)
  await ask(client)
  await ask(client)
  const third = await ask(client)
  t.equal(third.object, 'chat.completion', 'the third call succeeded')
  t.same(
    seen.map((s) => s.status),
    [200, 200, 429, 200],
    'one 429, then one successful retry',
  )
  const wait = Number(seen[2]?.retryAfterMs)
  t.ok(wait > 0 && wait <= WINDOW_MS, `the 429 said to wait ${wait} ms, within the window`)
  t.equal(seen[3]?.remaining, '1', 'the retry landed in a fresh window')
})

t.test('the SDK does not retry a request that can never fit', async (t) => {
  const { key } = await gw.createKey({ tier: 'Basic', limits: { [MODEL]: { rpm: 10, output_tpm: 100 } } })
  const { client, seen } = recordingClient(key, 3)
  const error = await ask(client, 500).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof OpenAI.RateLimitError, 'a RateLimitError')
  if (error instanceof OpenAI.RateLimitError) {
    t.equal(error.status, 429)
    t.equal(error.code, 'rate_limit_exceeded')
    t.equal(error.type, 'tokens')
    t.match(error.message, /can never fit/)
  }
  t.same(
    seen.map((s) => s.status),
    [429],
    'sent once: x-should-retry: false',
  )
})

t.test('the SDK does not retry a spent quota', async (t) => {
  const { key } = await gw.createKey({ tier: 'Basic', limits: { [MODEL]: { quota: 1 } } })
  const { client, seen } = recordingClient(key, 3)
  await ask(client)
  const error = await ask(client).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof OpenAI.RateLimitError)
  if (error instanceof OpenAI.RateLimitError) {
    t.equal(error.code, 'insufficient_quota')
    t.equal(error.type, 'insufficient_quota')
  }
  t.same(
    seen.map((s) => s.status),
    [200, 429],
    'the 429 was not retried',
  )
  t.equal(seen[1]?.retryAfterMs, null, 'and carried no retry hint')
})

t.test('a 429 caused by the default reservation says so, and which setting lowers it', async (t) => {
  // The case: Basic, Mistral (7,500 output TPM), concurrent streams without
  // max_tokens each reserve defaultMaxTokens (1,024): the eighth does not fit, though the
  // seven before it used 24 tokens each. Slow streams keep the seven open meanwhile.
  const slow = await startTollgate({
    config: (doc) => {
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 20
    },
  })
  t.teardown(() => slow.stop())
  const { key } = await slow.createKey({ tier: 'Basic' })
  const client = new OpenAI({ apiKey: key, baseURL: `${slow.url}/v2`, maxRetries: 0 })
  const open = (): Promise<unknown> =>
    client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'stream' }], stream: true })
  const first = await Promise.all(Array.from({ length: 7 }, open))
  const error = await open().then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof OpenAI.RateLimitError, 'the eighth is refused')
  if (error instanceof OpenAI.RateLimitError) {
    t.match(error.message, /output tokens per min/)
    t.match(
      error.message,
      /sets no max_tokens, so it reserved 1024 output tokens/,
      'it says the reservation was the default',
    )
    t.match(error.message, /defaultMaxTokens/, 'and names the setting')
    t.match(error.message, /set max_tokens/, 'and what the client can do')
  }
  for (const stream of first) (stream as { controller: AbortController }).controller.abort()
  const fits = await client.chat.completions
    .create({ model: MODEL, messages: [{ role: 'user', content: 'small' }], max_tokens: 5 })
    .catch((e: unknown) => e)
  t.notOk(
    fits instanceof Error && /sets no max_tokens/.test(fits.message),
    'a call with max_tokens is never told about the default',
  )
})
