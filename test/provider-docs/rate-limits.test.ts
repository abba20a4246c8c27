// The provider's Rate Limits page (telekom/aifoundation-docs, src/content/docs/v1/
// reference/rate-limits.mdx), with the retry example of reference/error-codes.mdx
// ("Handling Rate Limits (429)") and the FAQ's "What are the rate limits?" (faq.mdx),
// against the gateway `npm start` runs, with keys of the two tiers the page names.
// Per-model limits of every tier are in plans.test.ts.
import OpenAI, { RateLimitError } from 'openai'
import t from 'tap'
import { curlJson, RATE_LIMIT_HEADERS, startDocsGateway } from './docs-gateway.ts'

// The page's example output ("x-ratelimit-remaining-requests: 19") is a Basic key's.
const { gw, key, base } = await startDocsGateway('Basic')
const { key: standard4000 } = await gw.createKey({ name: 'provider-docs', tier: 'Standard4000' })

/** OpenAI's duration format, as the page's "x-ratelimit-reset-requests: 3s". */
const DURATION = /^(\d+h)?(\d+m)?(\d+(\.\d+)?s|\d+ms)$/

function ratelimit(res: Response): Record<string, string | null> {
  return Object.fromEntries(RATE_LIMIT_HEADERS.map((h) => [h, res.headers.get(h)]))
}

async function headlineLimits(apiKey: string): Promise<Record<string, string | null>> {
  // The headline figures are those of a representative T-Cloud model: Mistral Small 24B.
  const res = await curlJson(`${base}/chat/completions`, apiKey, {
    model: 'Mistral-Small-24B-Instruct-2501',
    messages: [{ role: 'user', content: 'Hello' }],
    max_tokens: 10,
  })
  await res.arrayBuffer()
  return {
    rpm: res.headers.get('x-ratelimit-limit-requests'),
    inputTpm: res.headers.get('x-ratelimit-limit-input-tokens'),
    tokens: res.headers.get('x-ratelimit-limit-tokens'),
  }
}

t.test(
  'rate-limits.mdx, Limits by Plan Tier (and faq.mdx): Basic 18,750 input TPM and 20 RPM; Standard4000 150,000 and 600',
  async (t) => {
    t.same(await headlineLimits(key), { rpm: '20', inputTpm: '18750', tokens: '18750' }, 'Basic')
    t.same(await headlineLimits(standard4000), { rpm: '600', inputTpm: '150000', tokens: '150000' }, 'Standard4000')
    // "Up to 600 RPM": no T-Cloud model of Standard4000 allows more (GET /admin/tiers).
    const tiers = (await (
      await fetch(`${gw.url}/admin/tiers`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
    ).json()) as { data: Array<{ name: string; models: Record<string, { rpm?: number }> }> }
    const tCloud = (
      (await (await fetch(`${base}/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as {
        data: Array<{ id: string; meta_data: { deployment_region: string } }>
      }
    ).data
      .filter((m) => m.meta_data.deployment_region.startsWith('otc-'))
      .map((m) => m.id)
    const s4000 = tiers.data.find((tier) => tier.name === 'Standard4000')
    t.equal(Math.max(...tCloud.map((id) => s4000?.models[id]?.rpm ?? 0)), 600)
  },
)

t.test('rate-limits.mdx, How Rate Limits Work: limits apply per API key', async (t) => {
  const { key: other } = await gw.createKey({ tier: 'Basic' })
  const body = { model: 'Qwen3-30B-A3B-FP8', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 10 }
  for (const apiKey of [key, key, other]) await (await curlJson(`${base}/chat/completions`, apiKey, body)).arrayBuffer()
  const mine = await curlJson(`${base}/chat/completions`, key, body)
  const theirs = await curlJson(`${base}/chat/completions`, other, body)
  t.equal(mine.headers.get('x-ratelimit-remaining-requests'), '17', 'three calls of this key')
  t.equal(theirs.headers.get('x-ratelimit-remaining-requests'), '18', 'the other key counts its own two')
})

t.test('rate-limits.mdx, How Rate Limits Work: input and output tokens both count', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'Teuken-7B-Instruct-v04',
    messages: [{ role: 'user', content: 'Hello there, how are you?' }],
    max_tokens: 20,
  })
  const reply = (await res.json()) as OpenAI.ChatCompletion
  const used = (dimension: string): number =>
    Number(res.headers.get(`x-ratelimit-limit-${dimension}`)) -
    Number(res.headers.get(`x-ratelimit-remaining-${dimension}`))
  t.ok(used('input-tokens') > 0, 'input tokens counted')
  t.ok(
    used('output-tokens') >= (reply.usage?.completion_tokens ?? 1),
    'output tokens counted (the reservation of max_tokens, settled at the end)',
  )
})

t.test('rate-limits.mdx, Rate Limit Response Headers: all six, on gpt-4.1 and o3-mini', async (t) => {
  for (const model of ['gpt-4.1', 'o3-mini']) {
    const res = await curlJson(`${base}/chat/completions`, key, {
      model,
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 10,
    })
    t.equal(res.status, 200)
    const headers = ratelimit(res)
    for (const name of RATE_LIMIT_HEADERS) t.ok(headers[name] !== null, `${model}: ${name}: ${headers[name]}`)
    t.match(headers['x-ratelimit-reset-requests'], DURATION)
    t.match(headers['x-ratelimit-reset-tokens'], DURATION)
  }
})

t.test(
  'rate-limits.mdx, Reading Headers (Python httpx and curl -i): a first call leaves 19 of 20 requests',
  async (t) => {
    const { key: fresh } = await gw.createKey({ tier: 'Basic' })
    // httpx.post(url, headers={"Authorization": ...}, json={...}): httpx sets the JSON Content-Type itself.
    const res = await curlJson(`${base}/chat/completions`, fresh, {
      model: 'gpt-4.1',
      messages: [{ role: 'user', content: 'Hello' }],
      max_tokens: 10,
    })
    t.equal(res.status, 200)
    const headers = ratelimit(res)
    t.equal(headers['x-ratelimit-remaining-requests'], '19', 'Requests remaining: 19')
    const tokens = Number(headers['x-ratelimit-remaining-tokens'])
    t.ok(tokens > 0 && tokens < Number(headers['x-ratelimit-limit-tokens']), `Tokens remaining: ${tokens}`)
    t.match(headers['x-ratelimit-reset-requests'], DURATION, `Resets in: ${headers['x-ratelimit-reset-requests']}`)
  },
)

/**
 * The page's safe_completion (and error-codes.mdx's call_with_retry, the same loop): on
 * RateLimitError wait 2 ** attempt seconds and try again, at most three times. The window
 * is a minute, so the waits are recorded instead of slept: the loop is what is under test.
 */
async function safeCompletion(
  client: OpenAI,
  messages: OpenAI.ChatCompletionMessageParam[],
  waits: number[],
  maxRetries = 3,
): Promise<OpenAI.ChatCompletion> {
  for (let attempt = 0; attempt < maxRetries; attempt++) {
    try {
      return await client.chat.completions.create({ model: 'Llama-3.3-70B-Instruct', messages })
    } catch (e) {
      if (!(e instanceof RateLimitError)) throw e
      waits.push(2 ** attempt) // print(f"Rate limited. Waiting {wait_time}s..."); time.sleep(wait_time)
    }
  }
  throw new Error('Max retries exceeded')
}

t.test(
  'rate-limits.mdx, Handling Rate Limits, and error-codes.mdx, Handling Rate Limits (429): the backoff loop',
  async (t) => {
    // The SDK's own retries (two by default, waiting what retry-after-ms says, here up to a
    // minute) are off, so that the page's loop is the one that retries.
    const { key: oneAMinute } = await gw.createKey({ tier: 'Basic', limits: { 'Llama-3.3-70B-Instruct': { rpm: 1 } } })
    const client = new OpenAI({ apiKey: oneAMinute, baseURL: base, maxRetries: 0 })
    const waits: number[] = []
    const first = await safeCompletion(client, [{ role: 'user', content: 'Hello' }], waits)
    t.equal(first.object, 'chat.completion')
    t.same(waits, [], 'within the limit: no retry')
    await t.rejects(safeCompletion(client, [{ role: 'user', content: 'Hello' }], waits), /Max retries exceeded/)
    t.same(waits, [1, 2, 4], 'over it: RateLimitError three times, waiting 1, 2 and 4 s')
    // What the SDK raised: a 429 with the hints the page's advice relies on.
    const refused = await client.chat.completions
      .create({ model: 'Llama-3.3-70B-Instruct', messages: [{ role: 'user', content: 'Hello' }] })
      .catch((e: unknown) => e)
    t.ok(refused instanceof RateLimitError, 'RateLimitError')
    if (refused instanceof RateLimitError) {
      t.equal(refused.status, 429)
      t.equal(refused.code, 'rate_limit_exceeded')
      t.ok(
        Number(refused.headers.get('retry-after')) > 0 && Number(refused.headers.get('retry-after-ms')) > 0,
        'retry-after and retry-after-ms',
      )
      t.equal(refused.headers.get('x-ratelimit-remaining-requests'), '0', 'Monitor response headers: remaining 0')
    }
  },
)
