// A client that opens a stream and stops reading: the gateway must not buffer the stream
// for it. Backpressure reaches the upstream (it stops being read, so it stops writing),
// the gateway's memory stays flat, and after server.idleReaderTimeoutMs the stream is
// ended: the upstream call is cut, and the key is charged exactly the tokens that were
// sent, which a client that comes back still receives, followed by an error event.
import { connect } from 'node:net'
import t from 'tap'
import { loadEncoder } from '../../src/tokenizer/tokens.ts'
import { countInPieces } from '../../src/tokenizer/chunked-count.ts'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { ResponseReader } from '../helpers/http-reader.ts'
import { MEMORY_PROBE, MiB, memoryOf, rssOf } from '../helpers/memory.ts'

const IDLE_READER_MS = 3000
const MODEL = 'gpt-4o'

let upstream: UpstreamProcess
let gw: RunningTollgate
let key: { key: string; id: string }

t.before(async () => {
  // Unpaced for practical purposes: without backpressure the whole reply (≈ 60 MB of
  // events) would be in flight within a second or two.
  upstream = await startUpstream(['--tokens-per-second', '200000'])
  gw = await startTollgate({
    execArgv: MEMORY_PROBE,
    config: (doc) => {
      Object.assign(doc.server as Record<string, unknown>, { idleReaderTimeoutMs: IDLE_READER_MS })
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {} } } }
    },
  })
  key = await gw.createKey({})
})
t.teardown(async () => {
  await gw.stop()
  await upstream.stop()
})

interface StreamRecord {
  readonly bytes: number
  readonly state: 'open' | 'ended' | 'closed'
}
const lastStream = async (): Promise<StreamRecord> => {
  const streams = (await (await fetch(`${upstream.url}/__streams`)).json()) as StreamRecord[]
  const last = streams.at(-1)
  if (last === undefined) throw new Error('the upstream has streamed nothing')
  return last
}
/** The key's usage totals once `requests` calls are metered (usage routes flush first). */
async function usageAfter(requests: number): Promise<{ output_tokens: number; requests: number }> {
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${gw.url}/admin/keys/${key.id}/usage`, {
      headers: { authorization: `Bearer ${gw.adminToken}` },
    })
    const totals = ((await res.json()) as { totals: { output_tokens: number; requests: number } }).totals
    if (totals.requests >= requests) return totals
    await sleep(100)
  }
  throw new Error(`fewer than ${requests} calls metered`)
}
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

function streamRequest(body: Record<string, unknown>): string {
  const json = JSON.stringify(body)
  return (
    `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key.key}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`
  )
}

/** The content of every chat.completion.chunk event, in order, and the other events. */
function readEvents(body: string): { text: string; errors: unknown[]; done: boolean } {
  let text = ''
  const errors: unknown[] = []
  let done = false
  for (const block of body.split('\n\n')) {
    const data = block
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n')
    if (data === '') continue
    if (data === '[DONE]') {
      done = true
      continue
    }
    const event = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }>; error?: unknown }
    if (event.error !== undefined) errors.push(event.error)
    for (const choice of event.choices ?? []) text += choice.delta?.content ?? ''
  }
  return { text, errors, done }
}

t.test(
  'a stream nobody reads: bounded memory, the upstream held back, ended after the idle-reader timeout, charged what flowed',
  async (t) => {
    const pid = gw.child.pid ?? 0
    // One small stream first, so start-up allocations are not counted as the stall's.
    const warm = connect(Number(new URL(gw.url).port), '127.0.0.1')
    const warmReader = new ResponseReader(warm)
    warm.write(
      streamRequest({ model: MODEL, messages: [{ role: 'user', content: 'warm up' }], max_tokens: 50, stream: true }),
    )
    t.equal((await warmReader.next('POST'))?.status, 200, 'a warm-up stream')
    warm.destroy()
    const warmUsage = await usageAfter(1)
    const before = await memoryOf(gw)
    const rssBefore = await rssOf(pid)

    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1')
    const reader = new ResponseReader(socket)
    // 4 replies of 65,536 tokens: about 60 MB of events.
    socket.write(
      streamRequest({
        model: MODEL,
        messages: [{ role: 'user', content: 'Tell me everything.' }],
        max_tokens: 65_536,
        n: 4,
        stream: true,
      }),
    )
    for (let i = 0; i < 500 && reader.pending < 16 * 1024; i++) await sleep(10)
    socket.pause()
    const startedAt = Date.now()

    // Before the timeout: the upstream has stopped being read, far short of the reply.
    await sleep(IDLE_READER_MS / 2)
    const first = await lastStream()
    await sleep(500)
    const second = await lastStream()
    const rssDuring = await rssOf(pid)
    const during = await memoryOf(gw)
    t.equal(second.state, 'open', 'the upstream stream is still open while the client may come back')
    t.equal(
      second.bytes,
      first.bytes,
      `the upstream wrote nothing more while the client did not read (${(second.bytes / MiB).toFixed(1)} MiB sent of ≈60)`,
    )
    t.ok(second.bytes < 30 * MiB, 'well short of the whole reply')
    // What the gateway holds for the stalled stream, after garbage collection: buffers
    // (arrayBuffers) and objects (heap). Without backpressure the reply would pile up here.
    const held = during.heapUsed + during.arrayBuffers - (before.heapUsed + before.arrayBuffers)
    t.ok(held < 8 * MiB, `the gateway holds little for it: +${(held / MiB).toFixed(2)} MiB of heap and buffers`)
    t.ok(
      rssDuring - rssBefore < 64 * MiB,
      `its resident memory stays bounded: +${((rssDuring - rssBefore) / MiB).toFixed(1)} MiB (garbage included)`,
    )

    // After it: the upstream call is cut.
    for (let i = 0; i < 100 && (await lastStream()).state === 'open'; i++) await sleep(100)
    const cut = await lastStream()
    t.equal(cut.state, 'closed', 'the gateway cut the upstream call')
    t.ok(Date.now() - startedAt >= IDLE_READER_MS - 200, 'not before the idle-reader timeout')

    // The client comes back and reads what it was sent: everything, then why it ended.
    socket.resume()
    const reply = await reader.next('POST')
    socket.destroy()
    t.equal(reply?.status, 200)
    const events = readEvents(reply?.body.toString('utf8') ?? '')
    t.equal(events.done, false, 'no [DONE]: the stream did not finish')
    t.match(
      events.errors,
      [{ code: 'client_read_timeout', type: 'invalid_request_error' }],
      'it ends with an error event saying why',
    )
    t.ok(events.text.length > 0, 'some content flowed')

    const encoder = await loadEncoder()
    const flowed = countInPieces(encoder, [events.text], Infinity).tokens
    const usage = await usageAfter(2)
    // The gateway counted them with the tokenizer: exactly, this far below its budget of characters.
    t.equal(
      usage.output_tokens - warmUsage.output_tokens,
      flowed,
      `metered output tokens equal those the client received (${flowed})`,
    )
    t.ok(flowed < 4 * 65_536, 'which is far less than the reply it asked for')
    t.comment(
      `upstream sent ${(cut.bytes / MiB).toFixed(2)} MiB before it was held back; during the stall the gateway held +${(held / MiB).toFixed(2)} MiB of heap and buffers after GC, RSS +${((rssDuring - rssBefore) / MiB).toFixed(1)} MiB; ${flowed} tokens flowed`,
    )
    // The log travels over the gateway's stdout pipe: it may trail the HTTP replies a little.
    const logged = (): boolean =>
      gw.logs().some((l) => l.msg === 'client stopped reading; stream ended and charged what was sent')
    for (let i = 0; i < 50 && !logged(); i++) await sleep(100)
    t.ok(logged(), 'the gateway logs why it ended the stream')
  },
)
