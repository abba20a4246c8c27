// The drop-in queue as the "done" describes it: the official SDK with baseURL
// …/queue, a Basic key (20 requests per window), 60 chat completions sent at once over
// two gateways on one Redis. All 60 succeed, none is answered 429, at most 20 are admitted
// per window, the key's order is kept, and the tokens metered equal the tokens that flowed.
// The window is shortened to 10 s to keep the test short; nothing else changes. Not
// shorter: the first 20 calls are sent one after another (each once the one before it
// has joined the line) and must all be sent within the first window, which at a load of
// 10 on two cores took over 2 s (then the 2 s window rolled after the 10th call).
import OpenAI from 'openai'
import t from 'tap'
import { adminCall } from '../admin/helpers.ts'
import { cluster, MODEL } from './helpers.ts'

const WINDOW_MS = 10_000
const CALLS = 60

const c = await cluster(t)
const a = await c.start({ windowMs: WINDOW_MS })
const b = await c.start({ windowMs: WINDOW_MS })
const admin = adminCall(a.url, c.adminToken)

interface Seen {
  readonly status: number
  readonly remaining: string | null
  readonly waitedMs: number
}

t.test(
  '60 calls over two gateways with a 20 RPM key: all succeed in order, 20 per window, tokens metered as they flowed',
  async (t) => {
    // Warm both gateways (tokenizer, key cache) with another key, so arrival order is send order.
    const warm = (await admin('POST', '/admin/keys', { tier: 'Standard4000' })).json<{ key: string }>().key
    for (const gw of [a, b]) {
      await new OpenAI({ apiKey: warm, baseURL: `${gw.url}/queue` }).chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'warm' }],
        max_tokens: 2,
      })
    }
    const created = (await admin('POST', '/admin/keys', { tier: 'Basic', name: 'queue-done' })).json<{
      id: string
      key: string
    }>()
    const seen: Seen[][] = Array.from({ length: CALLS }, () => [])
    // One client per gateway, made and used once before the test, so no call pays the
    // SDK's first-use setup; the call's index is read back from its body.
    const client = (gw: typeof a): OpenAI =>
      new OpenAI({
        apiKey: created.key,
        baseURL: `${gw.url}/queue`,
        maxRetries: 0,
        fetch: async (url, init) => {
          const res = await fetch(url, init)
          const index = /"call (\d+)"/.exec(typeof init?.body === 'string' ? init.body : '')?.[1]
          if (index !== undefined)
            seen[Number(index)]?.push({
              status: res.status,
              remaining: res.headers.get('x-ratelimit-remaining-requests'),
              waitedMs: Number(res.headers.get('x-queue-wait-ms')),
            })
          return res
        },
      })
    const clients = [client(a), client(b)]
    for (const sdk of clients) await sdk.models.list()

    const started = Date.now()
    // All 60 are in flight together; each is sent once the one before it has joined the
    // line (it waits in it, or was admitted at once), so the order they joined is known.
    const depth = async (): Promise<number> => {
      const lines = (await admin('GET', '/admin/queue')).json<{ data: Array<{ key_id: string; depth: number }> }>()
      return lines.data.find((l) => l.key_id === created.id)?.depth ?? 0
    }
    let settled = 0
    const notJoined: number[] = []
    let firstTwentySentMs = 0
    const calls: Array<Promise<OpenAI.Chat.Completions.ChatCompletion>> = []
    for (let i = 0; i < CALLS; i++) {
      let done = false
      const call = clients[i % 2]!.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: `call ${i}` }],
        max_tokens: 5,
      })
      calls.push(
        call.finally(() => {
          done = true
          settled++
        }),
      )
      const deadline = Date.now() + 30_000
      while (!done && (await depth()) < i + 1 - settled) {
        if (Date.now() > deadline) {
          notJoined.push(i)
          break
        }
        await new Promise((r) => setTimeout(r, 10))
      }
      if (i === 19) firstTwentySentMs = Date.now() - started
    }
    t.same(notJoined, [], 'each call joined the line (within 30 s) before the next was sent')
    const replies = await Promise.all(calls)
    const elapsed = Date.now() - started

    t.equal(replies.length, CALLS)
    t.ok(
      replies.every((r) => r.object === 'chat.completion' && r.choices[0]?.message.content),
      'all 60 succeeded',
    )
    const statuses = seen.flat().map((s) => s.status)
    t.same([...new Set(statuses)], [200], 'every exchange was a 200: none was answered 429, nothing was retried')
    t.equal(statuses.length, CALLS, 'one exchange per call')

    // Admission order is the order the calls joined: call i is admitted
    // (i mod 20)th in window ⌊i / 20⌋, so its remaining-requests is 19 − (i mod 20). More than
    // 20 in a window, or one call overtaking another, would break this sequence.
    const remaining = seen.map((s) => Number(s[0]?.remaining))
    t.same(
      remaining,
      Array.from({ length: CALLS }, (_, i) => 19 - (i % 20)),
      `FIFO within the key, 20 per window (the first 20 were sent in ${firstTwentySentMs} ms, the window is ${WINDOW_MS} ms)`,
    )
    const waited = seen.map((s) => s[0]?.waitedMs ?? 0)
    t.ok(
      waited.slice(20).every((w) => w > 0),
      'the calls past the first 20 waited in line',
    )
    t.ok(elapsed >= 2 * WINDOW_MS * 0.9, `three windows were needed (${elapsed} ms)`)

    // Metering: every call's tokens, as the upstream reported them, on the key's usage.
    const flowed = replies.reduce(
      (sum, r) => ({
        input: sum.input + (r.usage?.prompt_tokens ?? 0),
        output: sum.output + (r.usage?.completion_tokens ?? 0),
      }),
      { input: 0, output: 0 },
    )
    let totals = { requests: 0, input_tokens: 0, output_tokens: 0 }
    for (let i = 0; i < 50 && totals.requests < CALLS; i++) {
      // Each gateway writes its own calls within a second; the usage route flushes the one asked.
      const usage = (
        await adminCall(i % 2 ? b.url : a.url, c.adminToken)('GET', `/admin/keys/${created.id}/usage`)
      ).json<{ totals: typeof totals }>()
      totals = usage.totals
      if (totals.requests < CALLS) await new Promise((done) => setTimeout(done, 100))
    }
    t.equal(totals.requests, CALLS, 'every call was metered once')
    t.equal(totals.input_tokens, flowed.input, 'input tokens metered = input tokens that flowed')
    t.equal(totals.output_tokens, flowed.output, 'output tokens metered = output tokens that flowed')

    const lines = (await admin('GET', '/admin/queue')).json<{ data: unknown[]; total_depth: number }>()
    t.equal(lines.total_depth, 0, 'the line is empty afterwards')
  },
)
