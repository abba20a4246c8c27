// What the stream journal (src/keys/stream-journal.ts) adds to a stream, in CPU of the
// gateway's process, on each store: a stream's metering write alone (what every call
// pays), against the same write settling a journalled stream that was opened, fed its
// chunks and checkpointed on the way. In process, without HTTP, so that the difference
// is not lost in the noise of a whole request on a shared machine.
//
//   node bench/stream-journal.ts        prints a Markdown section
//   npm run bench -- stream-journal     also writes it into bench/results.md
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createMeter, type Meter } from '../src/keys/meter.ts'
import { createStreamJournal, type StreamStart } from '../src/keys/stream-journal.ts'
import { createLogger } from '../src/observability/logger.ts'
import { openEmbeddedStores } from '../src/store/embedded.ts'
import type { Stores } from '../src/store/ports.ts'
import { createRedisClient } from '../src/store/redis-client.ts'
import { createRedisStores } from '../src/store/redis.ts'
import { startPrivateRedis } from '../test/limits/helpers.ts'
import { fmt } from './proxy-rig.ts'

const STREAMS = 4000
const CONCURRENT = 50
/** Content chunks a stream delivers, and how many checkpoints come due along them (5 s of stream at 1 s). */
const CHUNKS = 200
const CHECKPOINTS = 5
const CHUNK = ' lorem ipsum'
const log = createLogger('silent')
const START: StreamStart = {
  keyId: 'key_bench',
  owner: 'bench',
  tier: 'Basic',
  model: 'bench-chat',
  inputTokens: 50,
  reservedOutputTokens: 4096,
  cost: (input, output) => input * 100 + output * 300,
}
const ROW = {
  keyId: 'key_bench',
  owner: 'bench',
  tier: 'Basic',
  model: 'bench-chat',
  inputTokens: 50,
  outputTokens: 200,
  costNanos: 65_000,
}

type Run = (meter: Meter, stores: Stores, clock: { ms: number }) => Promise<void>

/** CPU ms per stream of `run`, STREAMS of them, CONCURRENT at a time. */
async function cpuPerStream(stores: Stores, run: Run): Promise<number> {
  const meter = createMeter({ store: stores.usage, log })
  const clock = { ms: Date.now() }
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < STREAMS) {
      next++
      await run(meter, stores, clock)
    }
  }
  const before = process.cpuUsage()
  await Promise.all(Array.from({ length: CONCURRENT }, worker))
  const used = process.cpuUsage(before)
  await meter.close()
  return (used.user + used.system) / 1000 / STREAMS
}

const settleOnly: Run = (meter) => meter.record(ROW)

const journalled: Run = async (meter, stores, clock) => {
  const journal = createStreamJournal({
    journal: stores.streams,
    instance: 'bench',
    log,
    checkpointMs: 1000,
    now: () => clock.ms,
  })
  const tally = journal.begin(START)
  for (let i = 0; i < CHUNKS; i++) {
    // Time moves on by a checkpoint interval every CHUNKS / CHECKPOINTS chunks of this stream.
    if (i > 0 && i % (CHUNKS / CHECKPOINTS) === 0) {
      clock.ms += 1000
      await new Promise<void>((done) => setImmediate(done))
    }
    tally.delivered(CHUNK)
  }
  await tally.close()
  await meter.record({ ...ROW, stream: tally.id })
}

/** The chunks alone, with no store write at all: what every chunk of every stream pays. */
function perChunkMicros(): number {
  const journal = createStreamJournal({
    journal: {
      open: async () => undefined,
      checkpoint: async () => undefined,
      list: async () => [],
      recover: async () => null,
    },
    instance: 'bench',
    log,
    checkpointMs: 1_000_000,
  })
  const tally = journal.begin(START)
  const n = 2_000_000
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) tally.delivered(CHUNK)
  const used = process.cpuUsage(before)
  return (used.user + used.system) / n
}

async function measure(
  label: string,
  open: () => Promise<{ stores: Stores; close(): Promise<void> }>,
): Promise<string> {
  const rows: number[][] = [[], []]
  for (let round = 0; round < 3; round++) {
    for (const [i, run] of [settleOnly, journalled].entries()) {
      const { stores, close } = await open()
      rows[i]?.push(await cpuPerStream(stores, run))
      await close()
    }
  }
  const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0
  const [alone, journal] = [median(rows[0] ?? []), median(rows[1] ?? [])]
  return `| ${label} | ${fmt(alone, 3)} | ${fmt(journal, 3)} | +${fmt(journal - alone, 3)} |`
}

export async function benchStreamJournal(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'tg-bench-journal-'))
  let n = 0
  const embedded = await measure('embedded (SQLite file, WAL)', async () => {
    const stores = openEmbeddedStores(join(dir, `db${n++}`))
    return { stores, close: () => stores.close() }
  })
  rmSync(dir, { recursive: true, force: true })
  // A redis-server of its own (no persistence), never the shared one.
  const server = await startPrivateRedis()
  const redis = await measure('Redis (loopback)', async () => {
    const stores = createRedisStores(
      createRedisClient(server.url, { commandTimeoutMs: 5000, name: 'tgbench' }),
      `tgbench:${n++}:`,
    )
    // Connected before the first of 50 concurrent calls, as a gateway's store is.
    await stores.ping()
    return { stores, close: () => stores.close() }
  })
  await server.kill()
  const chunk = perChunkMicros()
  return [
    '## Stream journal: added cost per stream (bench/stream-journal.ts)',
    '',
    `In process, no HTTP: ${STREAMS.toLocaleString('en')} streams, ${CONCURRENT} at a time, each of ${CHUNKS} content chunks with`,
    `${CHECKPOINTS} checkpoints due on the way (a 5 s stream at store.streamCheckpointMs 1000). "Alone" is the metering`,
    'write every call pays; "journalled" adds the open, the chunks, the checkpoints and the entry removed in that',
    "write. CPU of this process (user + system) per stream, median of 3 rounds; Redis's own CPU is not counted.",
    '',
    '| Store | CPU ms/stream, metering alone | journalled | added |',
    '|---|---|---|---|',
    embedded,
    redis,
    '',
    `Per content chunk, the journal's share of the relay's work (the estimate of its text and a clock read): ${fmt(chunk * 1000, 0)} ns.`,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchStreamJournal()}\n`)
