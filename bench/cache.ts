// The response cache (src/cache/, issue 42): what a hit costs against the relay it saves,
// what a miss adds to a call, and memory per cached reply. A gateway on the embedded store
// with the cache on for its tier, in front of the built-in mock; each phase alternates
// rounds with the others so a busy machine weighs on all alike. CPU is the gateway
// process's own (/proc), latency the client's, one call at a time.
//
//   node bench/cache.ts            prints a Markdown section, then the semantic cache's (cache-semantic.ts)
import { createMemoryCacheStore } from '../src/cache/memory-store.ts'
import { createSealer } from '../src/cache/seal.ts'
import { startCacheGateway } from '../test/cache/helpers.ts'
import { benchSemanticCache } from './cache-semantic.ts'
import { cpuMsOf, fmt } from './proxy-rig.ts'

const CALLS = 200
const ROUNDS = 3
const MODEL = 'Llama-3.3-70B-Instruct'

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

async function phase(
  url: string,
  key: string,
  pid: number,
  body: (i: number) => string,
  headers: Record<string, string>,
  expect: string,
): Promise<{ cpuUs: number; ms: number }> {
  const cpu0 = cpuMsOf(pid)
  const times: number[] = []
  for (let i = 0; i < CALLS; i++) {
    const start = performance.now()
    const res = await fetch(`${url}/v2/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: body(i),
    })
    await res.arrayBuffer()
    times.push(performance.now() - start)
    if (res.status !== 200 || res.headers.get('x-tollgate-cache') !== expect)
      throw new Error(`${res.status} ${res.headers.get('x-tollgate-cache')}, expected ${expect}`)
  }
  return { cpuUs: ((cpuMsOf(pid) - cpu0) * 1000) / CALLS, ms: median(times) }
}

function memoryPerReply(): { bytes: number; sealed: number } {
  const reply = JSON.stringify({
    v: 1,
    reply: {
      id: 'chatcmpl-0123456789abcdef',
      object: 'chat.completion',
      created: 1_800_000_000,
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: 'word '.repeat(120) }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 40, completion_tokens: 120, total_tokens: 160 },
    },
    usage: { inputTokens: 40, outputTokens: 120 },
    storedAt: Date.now(),
  })
  const sealer = createSealer('a bench secret of 32 characters!')
  const store = createMemoryCacheStore({ maxBytes: 2 ** 31, scopeMaxBytes: 2 ** 31 })
  const n = 20_000
  globalThis.gc?.()
  const before = process.memoryUsage()
  for (let i = 0; i < n; i++) {
    const key = `k${i.toString(36).padStart(43, '0')}`
    void store.put(`o:owner${i % 50}`, key, sealer.seal(`o:owner${i % 50}`, key, Buffer.from(reply)), 3_600_000, {
      keyId: `key_${i % 200}`,
      owner: `owner${i % 50}`,
      tenant: `owner${i % 50}`,
      model: MODEL,
    })
  }
  globalThis.gc?.()
  const after = process.memoryUsage()
  const grown =
    after.heapUsed + after.external + after.arrayBuffers - (before.heapUsed + before.external + before.arrayBuffers)
  return { bytes: grown / n, sealed: Buffer.byteLength(reply) + 28 }
}

export async function benchCache(): Promise<string> {
  const gw = await startCacheGateway({ store: 'embedded' })
  try {
    const pid = gw.child.pid ?? 0
    const { key } = await gw.createKey({
      tier: 'Standard4000',
      owner: 'bench',
      limits: { '*': { rpm: 1_000_000, input_tpm: 1e9, output_tpm: 1e9 } },
    })
    const ask = (content: string): string =>
      JSON.stringify({ model: MODEL, temperature: 0, max_tokens: 120, messages: [{ role: 'user', content }] })
    let n = 0
    const results = { relay: [] as number[], relayMs: [] as number[], miss: [] as number[], missMs: [] as number[] }
    const hit = { cpu: [] as number[], ms: [] as number[] }
    await phase(gw.url, key, pid, () => ask('warm'), {}, 'miss').catch(() => undefined)
    for (let r = 0; r < ROUNDS; r++) {
      const relay = await phase(
        gw.url,
        key,
        pid,
        (i) => ask(`relay ${r} ${i}`),
        { 'cache-control': 'no-store' },
        'bypass',
      )
      const miss = await phase(gw.url, key, pid, (i) => ask(`miss ${r} ${i} ${n++}`), {}, 'miss')
      const hits = await phase(gw.url, key, pid, () => ask('warm'), {}, 'hit')
      results.relay.push(relay.cpuUs)
      results.relayMs.push(relay.ms)
      results.miss.push(miss.cpuUs)
      results.missMs.push(miss.ms)
      hit.cpu.push(hits.cpuUs)
      hit.ms.push(hits.ms)
    }
    const relayCpu = median(results.relay)
    const memory = memoryPerReply()
    const row = (name: string, cpu: number, ms: number): string =>
      `| ${name} | ${fmt(cpu)} | ${(cpu / relayCpu).toFixed(2)} | ${ms.toFixed(2)} |`
    return [
      '## Response cache: a hit against the relay, the cost of a miss (bench/cache.ts)',
      '',
      `One call at a time, ${CALLS} calls a phase, ${ROUNDS} rounds alternating, medians; a chat reply of`,
      '120 tokens from the built-in mock (2000 tokens/s, as the tests run it). "relay" is the call with',
      '`Cache-Control: no-store` (the cache not consulted); "miss" looks up, relays and stores a new',
      'body; "hit" answers from the cache. CPU is the gateway process\'s per call; ratio to the relay.',
      '',
      '| Call | CPU µs | ratio | latency ms |',
      '|---|---|---|---|',
      row('relay (no-store)', relayCpu, median(results.relayMs)),
      row('miss (look up + relay + store)', median(results.miss), median(results.missMs)),
      row('hit', median(hit.cpu), median(hit.ms)),
      '',
      `Memory per cached reply in the embedded store: ${fmt(memory.bytes)} bytes for a ${fmt(memory.sealed)}-byte`,
      'sealed reply (20,000 entries, heap + buffers grown, in process); the store counts each as its',
      'sealed bytes + 256.',
    ].join('\n')
  } finally {
    await gw.stop()
  }
}

if (import.meta.main) process.stdout.write(`${await benchCache()}\n\n${await benchSemanticCache()}\n`)
