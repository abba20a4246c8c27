// The mock's vector stores through a running gateway (issue #11): a text file of 1 and
// 8 MB attached to a store (the attach reply, then the time until the file is completed),
// then searches of the store; /healthz polled all along. Reports the worst event-loop delay
// inside the gateway (bench/loop-probe.ts), the slowest /healthz answer, search latency and
// the gateway's memory once the store is built.
import { LOOP_PROBE, loopDelay } from './loop-delay.ts'
import { startTollgate } from '../test/helpers/gateway.ts'
import { pollHealth } from '../test/helpers/health-poller.ts'
import { encodeMultipart } from '../test/helpers/multipart.ts'
import { fmt, memoryOf, mib, pause, quantile } from './proxy-rig.ts'

const SIZES = [1_000_000, 8_000_000]
const SEARCHES = 50

/** Prose-like text from a vocabulary of 5,000 made-up words, deterministic. */
function corpus(bytes: number): string {
  let state = 42
  const next = (): number => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648)
  const vocabulary = Array.from({ length: 5_000 }, (_, i) => `w${i.toString(36)}${'aeiou'[i % 5]}`)
  const words: string[] = []
  let size = 0
  while (size < bytes) {
    const word = vocabulary[next() % vocabulary.length] ?? 'x'
    words.push(word)
    size += word.length + 1
  }
  return words.join(' ')
}

interface Reading {
  readonly bytes: number
  readonly tokens: number
  readonly attachMs: number
  readonly completedMs: number
  readonly ingestLoopMaxMs: number
  readonly ingestHealthMs: number
  readonly searchP50: number
  readonly searchP99: number
  readonly searchLoopMaxMs: number
  readonly rss: number
}

export async function benchVectorStore(): Promise<string> {
  const gw = await startTollgate({ execArgv: LOOP_PROBE })
  const readings: Reading[] = []
  try {
    const { key } = await gw.createKey({
      tier: 'Standard4000',
      limits: { '*': { rpm: 100_000, tpm: 1_000_000_000, input_tpm: 1_000_000_000 } },
    })
    const auth = { authorization: `Bearer ${key}` }
    const json = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${gw.url}${path}`, {
        method,
        headers: { ...auth, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const value = (await res.json()) as Record<string, unknown>
      if (res.status !== 200) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(value)}`)
      return value
    }
    for (const bytes of SIZES) {
      const text = corpus(bytes)
      const form = encodeMultipart([
        { name: 'purpose', value: 'assistants' },
        { name: 'file', filename: 'corpus.txt', data: Buffer.from(text) },
      ])
      const file = (await (
        await fetch(`${gw.url}/v1/files`, {
          method: 'POST',
          headers: { ...auth, 'content-type': form.contentType },
          body: form.bytes,
        })
      ).json()) as { id: string }
      const store = await json('POST', '/v1/vector_stores', { name: `bench-${bytes}` })

      await loopDelay(gw)
      const poller = pollHealth(gw.url)
      const started = performance.now()
      const attached = await json('POST', `/v1/vector_stores/${String(store.id)}/files`, { file_id: file.id })
      const attachMs = performance.now() - started
      let status = attached.status
      while (status === 'in_progress') {
        await pause(20)
        status = (await json('GET', `/v1/vector_stores/${String(store.id)}/files/${file.id}`)).status
      }
      const completedMs = performance.now() - started
      const health = await poller.stop()
      const ingestLoopMaxMs = await loopDelay(gw)
      if (status !== 'completed') throw new Error(`the file ended ${String(status)}`)

      const words = text.split(' ')
      const times: number[] = []
      for (let i = 0; i < SEARCHES; i++) {
        const at = (i * 7919) % (words.length - 3)
        const t0 = performance.now()
        await json('POST', `/v1/vector_stores/${String(store.id)}/search`, { query: words.slice(at, at + 3).join(' ') })
        times.push(performance.now() - t0)
      }
      times.sort((a, b) => a - b)
      readings.push({
        bytes,
        tokens: Number((attached.usage as { prompt_tokens?: number } | undefined)?.prompt_tokens ?? 0),
        attachMs,
        completedMs,
        ingestLoopMaxMs,
        ingestHealthMs: health.worstMs,
        searchP50: quantile(times, 0.5),
        searchP99: quantile(times, 0.99),
        searchLoopMaxMs: await loopDelay(gw),
        rss: memoryOf(gw.child.pid ?? 0).rss,
      })
      process.stderr.write(
        `vector-store ${bytes}: attach ${attachMs.toFixed(0)} ms, completed ${completedMs.toFixed(0)} ms, search p50 ${readings.at(-1)?.searchP50.toFixed(1)} ms\n`,
      )
    }
  } finally {
    await gw.stop()
  }
  const rows = readings.map(
    (r) =>
      `| ${fmt(r.bytes / 1e6)} MB | ${fmt(r.tokens)} | ${fmt(r.attachMs)} | ${fmt(r.completedMs)} | **${fmt(r.ingestLoopMaxMs, 1)}** | ${fmt(r.ingestHealthMs, 1)} | ${fmt(r.searchP50, 1)} / ${fmt(r.searchP99, 1)} | ${fmt(r.searchLoopMaxMs, 1)} | ${mib(r.rss)} |`,
  )
  return [
    '## Vector stores on the mock: ingestion and search (bench/vector-store.ts)',
    '',
    'The default configuration (the mock serves /v1). One text file of made-up prose (5,000',
    'distinct words) uploaded to /v1/files and attached to a store with `auto` chunking (800',
    'tokens, overlap 400); "attach" is the reply (read, chunked, tokens counted), "completed"',
    'the time until polling sees the file completed (embedded). Then 50 searches of three',
    'words each, one at a time. /healthz polled every 20 ms during ingestion; loop max is the',
    'worst event-loop delay inside the gateway (resolution 5 ms). RSS after both files.',
    '',
    '| File | Tokens embedded | Attach ms | Completed ms | Loop max, ingestion ms | Slowest /healthz ms | Search p50 / p99 ms | Loop max, searches ms | Gateway RSS MiB |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchVectorStore()}\n`)
