// Nothing lost on a crash: a gateway is killed with SIGKILL in the middle of 200 calls
// (JSON and streamed), on the embedded store and on Redis. A gateway started again on the
// same store has metered the usage of every reply a client received in full: no call a
// client got is missing. The relay commits a call's usage just before its last bytes go
// out, so a call cut off in that instant may be charged too; only calls in flight at the
// kill can be, and usually none is.
import t, { type Test } from 'tap'
import { onSharedRedis, startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { testNamespace } from '../helpers/redis.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CALLS = 200
const CONCURRENCY = 16
/** The gateway dies once this many replies are complete. */
const KILL_AFTER = 100

interface Received {
  readonly input: number
  readonly output: number
}

/** One call; its usage if the reply arrived whole, null if it was cut off. */
async function call(gw: RunningTollgate, key: string, i: number): Promise<Received | null> {
  const stream = i % 2 === 1
  try {
    const res = await fetch(`${gw.url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: `call ${i}` }],
        max_tokens: 8 + (i % 13),
        ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
      }),
    })
    if (res.status !== 200) return null
    if (!stream) {
      const body = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } }
      return { input: body.usage.prompt_tokens, output: body.usage.completion_tokens }
    }
    const text = await res.text()
    // Whole means the stream's end marker arrived.
    if (!text.includes('data: [DONE]')) return null
    const usage = text
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { usage?: { prompt_tokens: number; completion_tokens: number } | null })
      .findLast((e) => e.usage)?.usage
    return usage ? { input: usage.prompt_tokens, output: usage.completion_tokens } : null
  } catch {
    return null
  }
}

async function crashTest(t: Test, options: StartOptions): Promise<void> {
  const first = await startTollgate({
    ...options,
    config: (doc) => {
      options.config?.(doc)
      // Streams of a few dozen milliseconds: plenty of calls are mid-flight when it dies.
      ;((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}).tokensPerSecond = 300
    },
  })
  const { key, id } = await first.createKey({
    tier: 'Standard4000',
    limits: { '*': { rpm: 100_000, input_tpm: 100_000_000, output_tpm: 100_000_000 } },
  })
  const received: Received[] = []
  let completed = 0
  let next = 0
  let inFlight = 0
  let inFlightAtKill = 0
  const worker = async (): Promise<void> => {
    while (next < CALLS) {
      const i = next++
      inFlight++
      const got = await call(first, key, i)
      inFlight--
      if (got) received.push(got)
      if (++completed === KILL_AFTER) {
        inFlightAtKill = inFlight
        first.child.kill('SIGKILL')
      }
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  t.equal(
    first.child.signalCode ?? (await new Promise((done) => first.child.once('exit', (_c, s) => done(s)))),
    'SIGKILL',
    'the gateway was killed',
  )
  t.ok(received.length >= KILL_AFTER - CONCURRENCY, `${received.length} replies arrived whole before the kill`)
  t.ok(received.length < CALLS, 'and the rest did not')

  const second = await startTollgate({ ...options, dataDir: first.dataDir, adminToken: first.adminToken })
  t.teardown(() => second.stop())
  const res = await fetch(`${second.url}/admin/keys/${id}/usage`, {
    headers: { authorization: `Bearer ${second.adminToken}` },
  })
  const { totals } = (await res.json()) as { totals: { requests: number; input_tokens: number; output_tokens: number } }
  const input = received.reduce((s, r) => s + r.input, 0)
  const output = received.reduce((s, r) => s + r.output, 0)
  // Calls charged although their reply was cut off by the kill (committed, last bytes lost).
  const extra = totals.requests - received.length
  t.ok(
    extra >= 0 && extra <= inFlightAtKill,
    `every reply received whole is metered; ${extra} of the ${inFlightAtKill} calls in flight at the kill were charged too`,
  )
  if (extra === 0) {
    t.same(
      { input: totals.input_tokens, output: totals.output_tokens },
      { input, output },
      'metered tokens = the tokens of the replies received whole',
    )
  } else {
    // Each call here asks for at most 20 completion tokens on a ~10-token prompt.
    t.ok(
      totals.input_tokens >= input && totals.input_tokens - input <= extra * 20,
      "input tokens: those received, plus at most the extra calls' prompts",
    )
    t.ok(
      totals.output_tokens >= output && totals.output_tokens - output <= extra * 20,
      "output tokens: those received, plus at most the extra calls' completions",
    )
  }
}

t.test('embedded store: kill -9 under load loses no metered usage', async (t) => {
  await crashTest(t, {})
})

t.test('Redis: kill -9 under load loses no metered usage', async (t) => {
  await crashTest(t, onSharedRedis(testNamespace(t, 'crash', 'tgtest-crash').namespace))
})
