// Streams nobody reads: 1, then 20 at once, each asking an upstream that writes as fast
// as it can for about 60 MB of events, each client reading 16 KiB and then nothing. What
// the upstream managed to send before backpressure held it, what the gateway holds for
// the stalled streams (heap and buffers after garbage collection, and RSS), when it ends
// them (server.idleReaderTimeoutMs, 5 s here), and the tokens charged against the tokens
// the clients received once they read again.
//
//   node bench/stalled-stream.ts   prints a Markdown section
import { connect, type Socket } from 'node:net'
import { loadEncoder } from '../src/tokenizer/tokens.ts'
import { countInPieces } from '../src/tokenizer/chunked-count.ts'
import { startTollgate, startUpstream } from '../test/helpers/gateway.ts'
import { ResponseReader } from '../test/helpers/http-reader.ts'
import { MEMORY_PROBE, MiB, memoryOf, rssOf } from '../test/helpers/memory.ts'

const IDLE_READER_MS = 5000
const MODEL = 'gpt-4o'

interface StreamRecord {
  readonly bytes: number
  readonly state: 'open' | 'ended' | 'closed'
}

export async function benchStalledStream(): Promise<string> {
  const upstream = await startUpstream(['--tokens-per-second', '200000'])
  const gw = await startTollgate({
    execArgv: MEMORY_PROBE,
    dropRequestLogs: true,
    config: (doc) => {
      Object.assign(doc.server as Record<string, unknown>, { idleReaderTimeoutMs: IDLE_READER_MS })
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      doc.models = [{ name: MODEL, kind: 'chat', deployments: [{ backend: 'up' }] }]
      doc.plans = { defaultTier: 'Open', tiers: { Open: { default: {} } } }
    },
  })
  const encoder = await loadEncoder()
  const port = Number(new URL(gw.url).port)
  const streams = async (): Promise<StreamRecord[]> =>
    (await (await fetch(`${upstream.url}/__streams`)).json()) as StreamRecord[]
  const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))
  const rows: string[] = []
  try {
    for (const count of [1, 20]) {
      const { key, id } = await gw.createKey({})
      const body = JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'Tell me everything.' }],
        max_tokens: 65_536,
        n: 4,
        stream: true,
      })
      const wire = `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`
      await sleep(1000)
      const seen = (await streams()).length
      const before = await memoryOf(gw)
      const rssBefore = await rssOf(gw.child.pid ?? 0)
      const clients: Array<{ socket: Socket; reader: ResponseReader }> = []
      for (let i = 0; i < count; i++) {
        const socket = connect(port, '127.0.0.1')
        const reader = new ResponseReader(socket)
        socket.write(wire)
        clients.push({ socket, reader })
      }
      await Promise.all(
        clients.map(async ({ socket, reader }) => {
          for (let i = 0; i < 1000 && reader.pending < 16 * 1024; i++) await sleep(10)
          socket.pause()
        }),
      )
      const stalledAt = performance.now()
      await sleep(IDLE_READER_MS / 2)
      const during = await memoryOf(gw)
      const rssDuring = await rssOf(gw.child.pid ?? 0)
      const mine = (await streams()).slice(seen)
      const sent = mine.reduce((sum, s) => sum + s.bytes, 0)
      while ((await streams()).slice(seen).some((s) => s.state === 'open') && performance.now() - stalledAt < 30_000)
        await sleep(100)
      const cutAfter = performance.now() - stalledAt
      // Each stream is ended idleReaderMs after its own writes blocked, and its client
      // then has one more such period to read the rest. With many streams those moments
      // spread over seconds, so only the single client comes back (when all are cut).
      let received: number | undefined
      if (count === 1) {
        received = 0
        const { socket, reader } = clients[0]!
        socket.resume()
        const reply = await reader.next('POST')
        socket.destroy()
        let text = ''
        for (const block of (reply?.body.toString('utf8') ?? '').split('\n\n')) {
          const data = block.startsWith('data: ') ? block.slice(6) : ''
          if (data === '' || data === '[DONE]') continue
          const event = JSON.parse(data) as { choices?: Array<{ delta?: { content?: string } }> }
          for (const choice of event.choices ?? []) text += choice.delta?.content ?? ''
        }
        received += countInPieces(encoder, [text], Infinity).tokens
      }
      for (const { socket } of clients) socket.destroy()
      let charged = 0
      for (let i = 0; i < 100; i++) {
        const totals = (
          (await (
            await fetch(`${gw.url}/admin/keys/${id}/usage`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
          ).json()) as { totals: { requests: number; output_tokens: number } }
        ).totals
        charged = totals.output_tokens
        if (totals.requests >= count) break
        await sleep(100)
      }
      const held = during.heapUsed + during.arrayBuffers - (before.heapUsed + before.arrayBuffers)
      rows.push(
        `| ${count} | ${(sent / MiB).toFixed(1)} (${(sent / count / MiB).toFixed(2)} each) | ${(held / MiB).toFixed(2)} (${(held / count / 1024).toFixed(0)} KiB each) | ${((rssDuring - rssBefore) / MiB).toFixed(1)} | ${(cutAfter / 1000).toFixed(1)} | ${received?.toLocaleString('en-US') ?? '(not read)'} | ${charged.toLocaleString('en-US')} |`,
      )
    }
  } finally {
    await gw.stop()
    await upstream.stop()
  }
  return [
    '## Streams nobody reads (bench/stalled-stream.ts)',
    '',
    'Streamed chat completions asking for 4 × 65,536 tokens (about 60 MB of events) from an',
    'upstream process writing as fast as it can (200,000 tok/s), through one gateway with',
    `\`server.idleReaderTimeoutMs\` ${IDLE_READER_MS}. Each client reads 16 KiB and then nothing, on a`,
    'connection it keeps open. "Upstream sent" is what the upstream wrote before backpressure',
    'held it (most of it sits in the kernel\'s socket buffers); "gateway holds" is the growth of',
    "the gateway's heap and buffers after garbage collection, half-way through the stall; RSS",
    'includes the garbage of the events relayed before it. "Cut after" is from the moment the',
    "clients stopped reading to the moment every upstream call was closed: each stream's",
    'timer starts when its own writes block, which with 20 streams sharing one upstream',
    'happens over a few seconds. Then the single client reads again: it gets what was sent',
    'and an error event (client_read_timeout), and the tokens in it are compared with what',
    "the key was charged (counted by the gateway's tokenizer).",
    '',
    '| Stalled streams | upstream sent (MiB) | gateway holds (MiB) | gateway RSS growth (MiB) | cut after (s) | tokens received | tokens charged |',
    '|---|---|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchStalledStream()}\n`)
