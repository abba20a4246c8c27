// A large multipart upload (an audio transcription) through the gateway to the upstream
// process, against the same upload sent to the upstream directly: throughput, the
// gateway's peak memory next to the body's size (it spools uploads to disk, so the peak
// should stay far below it), and proof that the upstream got every byte.
//
//   node bench/upload.ts               prints a Markdown section
import { once } from 'node:events'
import { readdirSync } from 'node:fs'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import {
  AUDIO_MODEL,
  cpuMsOf,
  fmt,
  memoryOf,
  mib,
  pause,
  resetPeak,
  sampleRss,
  startRig,
  type Rig,
} from './proxy-rig.ts'

/** File sizes, MiB: if the gateway held uploads in memory, its growth would follow them. */
const SIZES_MIB = [50, 200] as const
const CHUNK = randomBytes(2 ** 20)
/** Direct and gateway uploads alternate this many times per size. */
const ROUNDS = 2
/** One small upload each way first: the first upload's buffers and code are not what is measured. */
const WARMUP_MIB = 1
const BOUNDARY = '----tollgate-bench-boundary-b7Qx3kLm9pZt'

function form(fileBytes: number): { head: Buffer; tail: Buffer; length: number } {
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="model"\r\n\r\n${AUDIO_MODEL}\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="response_format"\r\n\r\njson\r\n` +
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="bench.mp3"\r\nContent-Type: audio/mpeg\r\n\r\n`,
  )
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`)
  return { head, tail, length: head.length + fileBytes + tail.length }
}

interface Upload {
  readonly fileBytes: number
  readonly status: number
  readonly body: string
  readonly bodyBytes: number
  /** From the first byte sent to the last byte handed to the socket. */
  readonly sentMs: number
  /** From the first byte sent to the end of the answer. */
  readonly totalMs: number
}

/** Streams the form from one 1 MiB buffer: the client holds no more than that. */
async function upload(url: string, key: string | undefined, fileBytes: number): Promise<Upload> {
  const { head, tail, length } = form(fileBytes)
  const t0 = performance.now()
  const req = httpRequest(url, {
    method: 'POST',
    headers: {
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
      'content-length': String(length),
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
    },
  })
  const answered = once(req, 'response') as Promise<[IncomingMessage]>
  answered.catch(() => undefined)
  let sentMs = NaN
  req.once('finish', () => {
    sentMs = performance.now() - t0
  })
  req.write(head)
  for (let written = 0; written < fileBytes; written += CHUNK.length) {
    if (!req.write(CHUNK)) await Promise.race([once(req, 'drain'), answered])
    if (req.destroyed) break
  }
  req.end(tail)
  const [res] = await answered
  let body = ''
  res.setEncoding('utf8')
  for await (const piece of res) body += piece as string
  return { fileBytes, status: res.statusCode ?? 0, body, bodyBytes: length, sentMs, totalMs: performance.now() - t0 }
}

interface Row {
  readonly path: 'direct' | 'via Tollgate'
  readonly result: Upload
  readonly upstreamLength: string | undefined
  readonly gateway?: {
    before: number
    peakSampled: number
    hwm: number | undefined
    after: number
    cpuMs: number
    spoolLeft: number
  }
}

async function viaGateway(rig: Rig, fileBytes: number): Promise<Row> {
  const pid = rig.gateway.child.pid ?? 0
  const before = memoryOf(pid).rss
  const reset = resetPeak(pid)
  const sampler = sampleRss(pid, 20)
  const cpu0 = cpuMsOf(pid)
  const result = await upload(`${rig.gateway.url}/v2/audio/transcriptions`, rig.key, fileBytes)
  const cpuMs = cpuMsOf(pid) - cpu0
  const peakSampled = sampler.stop()
  const end = memoryOf(pid)
  await pause(200)
  let spoolLeft = 0
  try {
    spoolLeft = readdirSync(join(rig.gateway.dataDir, 'spool')).length
  } catch {
    /* never made */
  }
  return {
    path: 'via Tollgate',
    result,
    upstreamLength: await lastUpstreamLength(rig),
    gateway: { before, peakSampled, hwm: reset ? end.hwm : undefined, after: end.rss, cpuMs, spoolLeft },
  }
}

async function lastUpstreamLength(rig: Rig): Promise<string | undefined> {
  const seen = await rig.upstream.requests()
  return seen.filter((r) => r.path.startsWith('/v1/audio/transcriptions')).at(-1)?.headers['content-length']
}

export async function benchUpload(): Promise<string> {
  const rig = await startRig({
    tokensPerSecond: 2000,
    config: (doc) => {
      ;(doc.server as Record<string, unknown>).uploadLimitBytes = 256 * 2 ** 20
    },
  })
  const rows: Row[] = []
  try {
    const direct = `${rig.upstream.url}/v1/audio/transcriptions`
    await upload(direct, undefined, WARMUP_MIB * 2 ** 20)
    await upload(`${rig.gateway.url}/v2/audio/transcriptions`, rig.key, WARMUP_MIB * 2 ** 20)
    for (const size of SIZES_MIB) {
      for (let round = 0; round < ROUNDS; round++) {
        rows.push({
          path: 'direct',
          result: await upload(direct, undefined, size * 2 ** 20),
          upstreamLength: await lastUpstreamLength(rig),
        })
        rows.push(await viaGateway(rig, size * 2 ** 20))
      }
    }
  } finally {
    await rig.stop()
  }

  const said = (r: Row): string => `audio file of ${r.result.fileBytes} bytes`
  const peakOf = (g: NonNullable<Row['gateway']>): number => Math.max(g.peakSampled, g.hwm ?? 0)
  const throughput = rows.map((r) => {
    const g = r.gateway
    const mbps = r.result.bodyBytes / 2 ** 20 / (r.result.totalMs / 1000)
    const memory = g
      ? `${mib(g.before)} | ${mib(peakOf(g))} | ${fmt((peakOf(g) - g.before) / 2 ** 20, 1)} | ${fmt(((peakOf(g) - g.before) / r.result.bodyBytes) * 100, 1)} % | ${fmt(g.cpuMs)}`
      : ' | | | | '
    return `| ${mib(r.result.fileBytes, 0)} | ${r.path} | ${r.result.status} | ${fmt(r.result.sentMs)} | ${fmt(r.result.totalMs)} | ${fmt(mbps)} | ${memory} |`
  })
  const verify = rows.map(
    (r) =>
      `| ${mib(r.result.fileBytes, 0)} | ${r.path} | ${fmt(r.result.bodyBytes)} | ${r.upstreamLength === undefined ? 'none' : fmt(Number(r.upstreamLength))} | ${r.upstreamLength === String(r.result.bodyBytes) ? 'yes' : 'NO'} | ${r.result.body.includes(said(r)) ? 'yes' : 'NO'} | ${r.gateway ? String(r.gateway.spoolLeft) : ''} |`,
  )
  return [
    '## Large uploads stay out of memory (bench/upload.ts)',
    '',
    `Multipart audio transcriptions (fields model and response_format, and a \`file\` part of`,
    `${SIZES_MIB.join(' or ')} MiB of random bytes, with Content-Length) sent by this process over loopback,`,
    'streamed from one 1 MiB buffer, either to the upstream process directly or through the',
    'gateway (`server.uploadLimitBytes` raised to 256 MiB for the run). The gateway reads the',
    'whole upload into a spool file in its data directory, then sends that file upstream;',
    'the upstream process spools it again to its own temp directory (one disk, with RAM',
    `free for the page cache). After one ${WARMUP_MIB} MiB upload each way, direct and gateway alternate`,
    `${ROUNDS} times per size. "Sent" is when the client had handed its last byte to the socket (through`,
    'the gateway: when the gateway had spooled it), "total" when the answer had arrived;',
    'MiB/s is the body over the total. Gateway RSS is read from /proc/<pid>/status: VmRSS',
    'before, and the peak (VmHWM reset just before the upload, and VmRSS sampled every',
    "20 ms). Growth = peak − before; the idle gateway's RSS is mostly code and the",
    "tokenizer's tables, there before any upload.",
    '',
    '| File MiB | Path | Status | Sent ms | Total ms | MiB/s | Gateway RSS before MiB | Gateway RSS peak MiB | Growth MiB | Growth / body | Gateway CPU ms |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...throughput,
    '',
    'Checks: the Content-Length the upstream received (from its request log) against the',
    'body sent, and the upstream\'s own count of the file part in its answer ("audio file of',
    'N bytes", N the file size), and that the gateway deleted its spool file.',
    '',
    '| File MiB | Path | Body bytes sent | Content-Length at the upstream | Same | Upstream counted the file part exactly | Gateway spool files left |',
    '|---|---|---|---|---|---|---|',
    ...verify,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchUpload()}\n`)
