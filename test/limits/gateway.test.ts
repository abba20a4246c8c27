// Plan limits through the real gateway: three `tollgate serve` processes on one Redis,
// driven over HTTP. Exactly the limit is admitted across instances, the token counters
// end equal to the tokens that flowed, headers count down across instances, and 429s
// carry OpenAI's body and retry hints.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { parseDuration } from '../../src/limits/duration.ts'
import { limiterKeys } from '../../src/limits/redis-counters.ts'
import { pingRedis } from '../../src/store/redis-client.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { deleteUnder, eventually, REDIS_URL, redisClient, testPrefix } from './helpers.ts'

const MODEL = 'gpt-4o-mini'
const redis = redisClient()
const prefix = testPrefix()
const gateways: RunningTollgate[] = []
t.teardown(async () => {
  try {
    await Promise.all(gateways.map((g) => g.stop()))
    await deleteUnder(redis, prefix)
  } finally {
    redis.disconnect()
  }
})

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: {
    usage?: { prompt_tokens: number; completion_tokens: number }
    error?: { message: string; type: string; param: null; code: string }
  }
}

async function chat(gw: RunningTollgate, key: string, content: string, maxTokens: number): Promise<Reply> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: maxTokens }),
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as Reply['body'] }
}

const counter = (
  keyId: string,
  code: 'requests' | 'tokens' | 'input_tokens' | 'output_tokens',
): Promise<string | null> => redis.get(limiterKeys(prefix).counter({ keyId, model: MODEL }, { name: code }))

if (!(await pingRedis(redis))) {
  t.fail(`Redis does not answer at ${REDIS_URL}: the gateway limit tests need it (set REDIS_URL or start redis-server)`)
} else {
  const adminToken = `adm_${randomBytes(16).toString('hex')}`
  const env = { REDIS_URL, TOLLGATE_KEY_SECRET: randomBytes(32).toString('hex') }
  const config = (doc: Record<string, unknown>): void => {
    ;(doc.store as Record<string, unknown>).keyPrefix = prefix
  }
  gateways.push(...(await Promise.all([0, 1, 2].map(() => startTollgate({ env, adminToken, config })))))
  const [a, b, c] = gateways as [RunningTollgate, RunningTollgate, RunningTollgate]

  t.test('a 20 RPM key hit with 200 concurrent requests over three gateways admits exactly 20', async (t) => {
    const { key, id } = await a.createKey({ tier: 'Basic', limits: { [MODEL]: { rpm: 20 } } })
    const replies = await Promise.all(
      Array.from({ length: 200 }, (_, i) => chat(gateways[i % 3] ?? a, key, `hello ${i}`, 5)),
    )
    const ok = replies.filter((r) => r.status === 200)
    const refused = replies.filter((r) => r.status === 429)
    t.equal(ok.length, 20, 'exactly 20 admitted')
    t.equal(refused.length, 180, 'every other one answered 429')
    t.ok(
      refused.every((r) => r.body.error?.type === 'requests' && r.body.error.code === 'rate_limit_exceeded'),
      'as OpenAI: type requests, code rate_limit_exceeded',
    )
    t.ok(
      refused.every((r) =>
        r.body.error?.message.startsWith(
          `Rate limit reached for ${MODEL} on requests per min (RPM): Limit 20, Used 20, Requested 1. Please try again in `,
        ),
      ),
    )
    t.ok(
      refused.every((r) => {
        const ms = Number(r.headers.get('retry-after-ms'))
        return (
          ms > 0 &&
          ms <= 60_000 &&
          r.headers.get('retry-after') === String(Math.ceil(ms / 1000)) &&
          r.headers.get('x-ratelimit-remaining-requests') === '0'
        )
      }),
      'each 429 carries retry-after, retry-after-ms and the limit state',
    )
    t.equal(await counter(id, 'requests'), '20', 'Redis holds 20 requests: refusals left no trace')
  })

  t.test('headers count down request by request across instances and match Redis', async (t) => {
    const { key, id } = await a.createKey({
      tier: 'Basic',
      limits: { [MODEL]: { rpm: 30, input_tpm: 100_000, output_tpm: 50_000 } },
    })
    let previousInput = 100_000
    for (let i = 1; i <= 9; i++) {
      const gw = gateways[i % 3] ?? a
      const reply = await chat(gw, key, `count ${i}`, 7)
      t.equal(reply.status, 200)
      const h = (name: string): string | null => reply.headers.get(name)
      t.equal(h('x-ratelimit-limit-requests'), '30')
      t.equal(
        h('x-ratelimit-remaining-requests'),
        String(30 - i),
        `request ${i} (instance ${i % 3}) sees ${30 - i} left`,
      )
      t.equal(await counter(id, 'requests'), String(i), 'the same count is in Redis')
      const input = Number(h('x-ratelimit-remaining-input-tokens'))
      t.ok(input < previousInput, 'input tokens remaining go down')
      previousInput = input
      t.equal(h('x-ratelimit-limit-tokens'), '100000', '-tokens shows the input limit when the plan has no tpm')
      for (const name of ['requests', 'tokens', 'input-tokens', 'output-tokens']) {
        const ms = parseDuration(h(`x-ratelimit-reset-${name}`) ?? '')
        t.ok(
          ms !== null && ms > 0 && ms <= 60_000,
          `x-ratelimit-reset-${name} is a duration: ${h(`x-ratelimit-reset-${name}`)}`,
        )
      }
    }
  })

  t.test(
    'after reservation and reconciliation the counters equal the tokens that flowed; refusals leave nothing',
    async (t) => {
      const { key, id } = await a.createKey({
        tier: 'Basic',
        limits: { [MODEL]: { rpm: 1000, tpm: 1_000_000, input_tpm: 1_000_000, output_tpm: 900 } },
      })
      // 60 concurrent calls reserving 40 output tokens each: only ~22 fit at once.
      const replies = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          chat(gateways[i % 3] ?? a, key, `tokens ${'word '.repeat(i % 7)}${i}`, 40),
        ),
      )
      const ok = replies.filter((r) => r.status === 200)
      const refused = replies.filter((r) => r.status === 429)
      t.ok(ok.length > 0 && refused.length > 0, `some admitted (${ok.length}), some refused (${refused.length})`)
      t.ok(
        refused.every(
          (r) =>
            r.body.error?.type === 'tokens' &&
            /on output tokens per min \(TPM\): Limit 900, Used \d+, Requested 40\./.test(r.body.error.message),
        ),
        'refused on output tokens, saying so',
      )
      const input = ok.reduce((sum, r) => sum + (r.body.usage?.prompt_tokens ?? 0), 0)
      const output = ok.reduce((sum, r) => sum + (r.body.usage?.completion_tokens ?? 0), 0)
      t.ok(input > 0 && output > 0)
      // Settles run as each reply ends; give the last ones a moment.
      const settled = await eventually(async () => (await counter(id, 'output_tokens')) === String(output), 100, 20)
      t.ok(settled, 'output counter reconciled')
      t.equal(
        await counter(id, 'output_tokens'),
        String(output),
        'output tokens counted = completion tokens that flowed',
      )
      t.equal(await counter(id, 'input_tokens'), String(input), 'input tokens counted = prompt tokens that flowed')
      t.equal(await counter(id, 'tokens'), String(input + output), 'tokens counted = total tokens that flowed')
      t.equal(await counter(id, 'requests'), String(ok.length), 'requests counted = requests admitted')
    },
  )

  t.test('a request that can never fit says so, and refusals after authentication still carry headers', async (t) => {
    const { key } = await b.createKey({
      tier: 'Basic',
      limits: { [MODEL]: { rpm: 10, input_tpm: 100_000, output_tpm: 100 } },
    })
    const tooLarge = await chat(c, key, 'big', 500)
    t.equal(tooLarge.status, 429)
    t.equal(tooLarge.body.error?.type, 'tokens')
    t.equal(tooLarge.body.error?.code, 'rate_limit_exceeded')
    t.match(
      tooLarge.body.error?.message,
      `Request too large for ${MODEL} on output tokens per min (TPM): Limit 100, Requested 500`,
    )
    t.equal(tooLarge.headers.get('retry-after'), null)
    t.equal(tooLarge.headers.get('x-should-retry'), 'false')
    t.equal(tooLarge.headers.get('x-ratelimit-remaining-requests'), '10', 'nothing consumed')
    const bad = await fetch(`${c.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: 'not a list' }),
    })
    t.equal(bad.status, 400, 'a bad body is still refused as such')
  })
}
