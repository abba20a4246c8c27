// An attacker who puts the prompt's weight where the estimate does not look: 30 concurrent
// calls, each "hi" plus a large `tools` array (or a JSON-schema response_format, metadata,
// a prediction, or tools on the Responses API), against a key with an input_tpm of
// 20,000. Before the fix every one of them was admitted: 238,400 input tokens metered in
// one window, 11.9× the limit. Now what the gateway admits in the window stays within the
// limit plus one call's worth, measured where it matters: what the upstream billed and the
// gateway metered (the upstream is a separate process running the mock's logic, which
// bills tool definitions and schemas as input as real upstreams do), and, for fields it
// does not bill, the tokens of what was admitted.
import t, { type Test } from 'tap'
import { loadEncoder } from '../../src/tokenizer/tokens.ts'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { request } from '../helpers/http.ts'
import { functionTools, jsonSchemaFormat, metadataOf, predictionOf, responsesTools } from '../helpers/prompt-fields.ts'

const MODEL = 'm-fields'
const INPUT_TPM = 20_000
const CONCURRENT = 30

let upstream: UpstreamProcess
let gw: RunningTollgate
const encoder = await loadEncoder()

t.before(async () => {
  // Slow streams (see 'metadata and a prediction'); whole replies come at once regardless.
  upstream = await startUpstream(['--tokens-per-second', '20'])
  gw = await startTollgate({
    config: (doc) => {
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      // No limits but the key's own.
      doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {} } } }
    },
  })
})
t.teardown(async () => {
  await gw.stop()
  await upstream.stop()
})

interface Burst {
  readonly admitted: number
  readonly refused: number
  /** Input tokens the upstream billed, per admitted call. */
  readonly billed: readonly number[]
  /** Input tokens the gateway metered for the key. */
  readonly metered: number
}

/** A new key with the small input_tpm, and CONCURRENT copies of `body` sent to it at once. */
async function burst(path: '/v2/chat/completions' | '/v2/responses', body: Record<string, unknown>): Promise<Burst> {
  const { key, id } = await gw.createKey({ limits: { [MODEL]: { input_tpm: INPUT_TPM, rpm: 1000 } } })
  const payload = JSON.stringify({ model: MODEL, ...body })
  const replies = await Promise.all(
    Array.from({ length: CONCURRENT }, () =>
      request(`${gw.url}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: payload,
      }),
    ),
  )
  const others = replies
    .filter((r) => r.status !== 200 && r.status !== 429)
    .map((r) => `${r.status} ${r.text.slice(0, 200)}`)
  if (others.length > 0) throw new Error(`unexpected replies: ${others.join('; ')}`)
  const billed = replies
    .filter((r) => r.status === 200)
    .map((r) => {
      const usage = r.json<{ usage: { prompt_tokens?: number; input_tokens?: number } }>().usage
      return usage.prompt_tokens ?? usage.input_tokens ?? 0
    })
  const res = await request(`${gw.url}/admin/keys/${id}/usage`, {
    headers: { authorization: `Bearer ${gw.adminToken}` },
  })
  const rows = res.json<{ by_model: Array<{ model: string; input_tokens: number }> }>().by_model
  return {
    admitted: billed.length,
    refused: replies.length - billed.length,
    billed,
    metered: rows.find((r) => r.model === MODEL)?.input_tokens ?? 0,
  }
}

/**
 * CONCURRENT streams of `body` at once, each held open (20 tokens a second, 400 of them)
 * until every one has been admitted or refused, then abandoned: so every admitted call
 * is in flight at the same time, and none has handed its reservation back.
 */
async function heldStreams(body: Record<string, unknown>): Promise<{ admitted: number; refused: number }> {
  const { key } = await gw.createKey({ limits: { [MODEL]: { input_tpm: INPUT_TPM, rpm: 1000 } } })
  const payload = JSON.stringify({ model: MODEL, ...body, max_tokens: 400, stream: true })
  const controllers = Array.from({ length: CONCURRENT }, () => new AbortController())
  const statuses = await Promise.all(
    controllers.map(async (controller) => {
      const res = await fetch(`${gw.url}/v2/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: payload,
        signal: controller.signal,
      })
      if (res.status !== 200) await res.text()
      return res.status
    }),
  )
  for (const controller of controllers) controller.abort()
  const others = statuses.filter((s) => s !== 200 && s !== 429)
  if (others.length > 0) throw new Error(`unexpected statuses: ${others.join(', ')}`)
  const admitted = statuses.filter((s) => s === 200).length
  return { admitted, refused: CONCURRENT - admitted }
}

const tokensOf = (value: unknown): number => encoder.count(JSON.stringify(value))

/** Where the upstream bills the field: the metered input stays within the limit plus one call's. */
function withinMetered(t: Test, name: string, result: Burst): void {
  const oneCall = Math.max(...result.billed)
  t.ok(result.admitted >= 1, `${name}: ${result.admitted} admitted, ${result.refused} refused`)
  t.equal(
    result.metered,
    result.billed.reduce((a, b) => a + b, 0),
    `${name}: metered what the upstream billed (${result.metered})`,
  )
  t.ok(
    result.metered <= INPUT_TPM + oneCall,
    `${name}: ${result.metered} input tokens metered ≤ ${INPUT_TPM} + one call's ${oneCall}`,
  )
}

/** Where it does not (metadata, a prediction): the text admitted at once stays within the limit plus one call's. */
function withinAdmitted(
  t: Test,
  name: string,
  result: { admitted: number; refused: number },
  fieldTokens: number,
): void {
  const admittedTokens = result.admitted * fieldTokens
  t.ok(result.admitted >= 1, `${name}: ${result.admitted} admitted, ${result.refused} refused`)
  t.ok(
    admittedTokens <= INPUT_TPM + fieldTokens,
    `${name}: ${admittedTokens} tokens of it admitted ≤ ${INPUT_TPM} + one call's ${fieldTokens}`,
  )
}

const HI = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }

t.test('the finding: "hi" plus 47 KB of tools, 30 at once', async (t) => {
  const tools = functionTools(90)
  t.ok(JSON.stringify(tools).length > 45_000, `${JSON.stringify(tools).length} bytes of tools`)
  const result = await burst('/v2/chat/completions', { ...HI, tools })
  withinMetered(t, 'tools', result)
  t.ok((result.billed[0] ?? 0) > tokensOf(tools), 'the upstream billed the tools as input')
  t.ok(result.refused >= CONCURRENT - 2, 'the rest were refused')
})

t.test('modest tools are not refused far below the limit', async (t) => {
  const tools = functionTools(10)
  const result = await burst('/v2/chat/completions', { ...HI, tools })
  withinMetered(t, 'modest tools', result)
  // The estimate sits at about 1.35× the tokens of tool schemas: most of the limit is used.
  t.ok(
    result.metered >= INPUT_TPM * 0.6,
    `${result.metered} of ${INPUT_TPM} input tokens used by ${result.admitted} calls`,
  )
})

t.test('a JSON-schema response_format', async (t) => {
  const format = jsonSchemaFormat(400)
  const result = await burst('/v2/chat/completions', { ...HI, response_format: format })
  withinMetered(t, 'response_format', result)
  t.ok(result.admitted < CONCURRENT, 'not all of them were admitted')
})

t.test('tools on the Responses API', async (t) => {
  const result = await burst('/v2/responses', { input: 'hi', max_output_tokens: 16, tools: responsesTools(40) })
  withinMetered(t, 'responses tools', result)
  t.ok(result.admitted < CONCURRENT, 'not all of them were admitted')
})

// The upstream hands these reservations back at settle (it bills neither as input), so
// what is checked is what was admitted while all of the calls were in flight together.
t.test('metadata and a prediction: reserved although the upstream does not bill them as input', async (t) => {
  // Metadata at OpenAI's limits is about 1,700 tokens: 11 fit in 20,000.
  const metadata = metadataOf()
  withinAdmitted(t, 'metadata', await heldStreams({ messages: HI.messages, metadata }), tokensOf(metadata))
  const prediction = predictionOf(24_000)
  withinAdmitted(t, 'prediction', await heldStreams({ messages: HI.messages, prediction }), tokensOf(prediction))
})

t.test(
  'the /queue twin reserves on the same estimate: tools larger than the limit can never fit there either',
  async (t) => {
    const { key } = await gw.createKey({ limits: { [MODEL]: { input_tpm: 10_000, rpm: 1000 } } })
    // More tokens of tools than the limit, by the tokenizer: no window could hold them.
    const tools = functionTools(80)
    t.ok(tokensOf(tools) > 10_000, `${tokensOf(tools)} tokens of tools`)
    const res = await request(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, ...HI, tools }),
    })
    t.equal(
      res.status,
      429,
      `"hi" and ${tokensOf(tools)} tokens of tools against an input_tpm of 10,000: refused, not queued`,
    )
    t.match(res.json().error.message, /can never fit/)
    const small = await request(`${gw.url}/queue/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, ...HI, tools: functionTools(5) }),
    })
    t.equal(small.status, 200, 'a call with modest tools runs')
    t.ok(
      small.json<{ usage: { prompt_tokens: number } }>().usage.prompt_tokens > tokensOf(functionTools(5)),
      'and its tools were billed as input',
    )
  },
)
