// A stream cut by a crash is still charged: a client reads a long, slow stream; the
// gateway is killed with SIGKILL in the middle of it; a gateway started again on the same
// store (the same data directory; the same Redis prefix) charges that stream as one
// request, with at least the output tokens the client had received, counted the way the
// gateway counts a stream that reports no usage. It says so in its log and its metrics.
import t, { type Test } from 'tap'
import { countTextTokens } from '../../src/tokenizer/tokens.ts'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { testNamespace } from '../helpers/redis.ts'
import { eventually } from '../limits/helpers.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
/** The mock's pace: one content chunk (one token) per 25 ms. */
const TOKENS_PER_SECOND = 40
const CHECKPOINT_MS = 200
/** The client reads this many content chunks (about 2 s of stream, many checkpoints), then the gateway dies. */
const CHUNKS_BEFORE_KILL = 80

interface Totals {
  readonly requests: number
  readonly input_tokens: number
  readonly output_tokens: number
}

async function usageOf(gw: RunningTollgate, id: string): Promise<Totals> {
  const res = await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  return ((await res.json()) as { totals: Totals }).totals
}

/** Reads a stream until `chunks` content chunks arrived; returns their text and a way to read on (it fails once the gateway is gone). */
async function readPartially(
  gw: RunningTollgate,
  key: string,
  chunks: number,
): Promise<{ text: string; chunks: number; rest: Promise<unknown> }> {
  const res = await fetch(`${gw.url}/v2/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'Tell me a very long story.' }],
      max_tokens: 4000,
      stream: true,
    }),
  })
  if (res.status !== 200 || res.body === null) throw new Error(`the stream was refused: ${res.status}`)
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let buffered = ''
  let text = ''
  let received = 0
  while (received < chunks) {
    const next = await reader.read()
    if (next.done) throw new Error(`the stream ended after ${received} chunks`)
    buffered += decoder.decode(next.value, { stream: true })
    let cut: number
    while ((cut = buffered.indexOf('\n\n')) !== -1) {
      const event = buffered.slice(0, cut)
      buffered = buffered.slice(cut + 2)
      if (!event.startsWith('data: {')) continue
      const data = JSON.parse(event.slice(6)) as { choices: Array<{ delta?: { content?: string } }> }
      const content = data.choices[0]?.delta?.content
      if (content) {
        text += content
        received++
      }
    }
  }
  // Whatever arrives after this point is not counted: the assertion needs what the client had at least.
  return {
    text,
    chunks: received,
    rest: (async () => {
      for (;;) if ((await reader.read()).done) return
    })().catch(() => undefined),
  }
}

async function crashMidStream(t: Test, options: StartOptions): Promise<void> {
  const configure = (doc: Record<string, unknown>): void => {
    options.config?.(doc)
    ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = TOKENS_PER_SECOND
    ;(doc.store as Record<string, unknown>).streamCheckpointMs = CHECKPOINT_MS
    // A gateway that stopped is noticed within about a second (its heartbeat lasts half this).
    ;(doc.queue as Record<string, unknown>).recoverAfterMs = 2000
  }
  const first = await startTollgate({ ...options, config: configure })
  const { key, id } = await first.createKey({
    tier: 'Standard4000',
    limits: { '*': { rpm: 1000, input_tpm: 10_000_000, output_tpm: 10_000_000 } },
  })

  const got = await readPartially(first, key, CHUNKS_BEFORE_KILL)
  first.child.kill('SIGKILL')
  const signal =
    first.child.signalCode ?? (await new Promise((done) => first.child.once('exit', (_code, s) => done(s))))
  t.equal(signal, 'SIGKILL', 'the gateway was killed mid-stream')
  await got.rest
  const received = await countTextTokens(got.text)
  t.ok(received >= CHUNKS_BEFORE_KILL / 2, `the client had received ${got.chunks} chunks, ${received} tokens`)

  /** The gateway again, on the crashed one's data, as an operator restarts it. */
  const restart = async (): Promise<RunningTollgate> => {
    const next = await startTollgate({
      ...options,
      config: configure,
      dataDir: first.dataDir,
      adminToken: first.adminToken,
    })
    t.teardown(() => next.stop())
    return next
  }
  const second = await restart()
  let totals: Totals = { requests: 0, input_tokens: 0, output_tokens: 0 }
  const charged = await eventually(async () => (totals = await usageOf(second, id)).requests > 0, 150, 50)
  t.ok(charged, 'the cut stream is charged by the gateway started after the crash')
  t.equal(totals.requests, 1, 'as one request')
  t.ok(totals.input_tokens > 0, `its prompt is charged (${totals.input_tokens} tokens)`)
  t.ok(
    totals.output_tokens >= received,
    `at least the ${received} output tokens the client received (charged ${totals.output_tokens})`,
  )
  // Estimated (within about 20 %) plus a 10 % margin, and written ahead by two checkpoint
  // intervals at the stream's pace: more, but nowhere near the 4,000 reserved.
  t.ok(totals.output_tokens <= 1.5 * received + (2 * TOKENS_PER_SECOND * CHECKPOINT_MS) / 1000, 'and not much more')

  const line = second.logs().find((l) => l.recovered === true)
  t.match(
    line,
    { keyId: id, model: MODEL, outputTokens: totals.output_tokens },
    'the log says it was recovered, and for whom',
  )
  const metrics = await (await fetch(`${second.metricsUrl}/metrics`)).text()
  t.match(metrics, /^tollgate_usage_recovered_total 1$/m, 'and so does the metric')

  // Recovered once: nothing more is charged later, by this gateway or by the next one.
  t.equal(await second.stop(), 0, 'the second gateway stops cleanly')
  const third = await restart()
  t.strictSame(await usageOf(third, id), totals, 'a later start charges nothing more')
}

t.test('embedded store: a stream cut by kill -9 is charged what the client received', async (t) => {
  await crashMidStream(t, {})
})

t.test('Redis: a stream cut by kill -9 is charged what the client received', async (t) => {
  await crashMidStream(t, onSharedRedis(testNamespace(t, 'crash-stream', 'tgtest-crash').namespace))
})
