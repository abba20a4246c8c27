// The fuzz suite at ten times its CI length: 200,000 cases, each part of test/fuzz/parts.ts
// on a gateway of its own. Records the cases, the replies by status, the failures (there
// must be none: a 5xx, a hang, a leak, a reply not in the contract's shape), and the
// gateway's memory before and after each part.
//
//   node bench/fuzz.ts   prints a Markdown section (FUZZ_SEED replays a run)
import { MiB } from '../test/helpers/memory.ts'
import { FUZZ_PARTS } from '../test/fuzz/parts.ts'
import { fuzzSeed } from '../test/fuzz/runner.ts'
import { runFuzzSession, type SessionResult } from '../test/fuzz/session.ts'

const SCALE = 10

const fmt = (n: number): string => n.toLocaleString('en-US')

export async function benchFuzz(): Promise<string> {
  const seed = fuzzSeed(process.env)
  const rows: Array<{ name: string; what: string; result: SessionResult }> = []
  for (const [i, part] of FUZZ_PARTS.entries()) {
    process.stderr.write(`fuzz: ${part.name}, ${fmt(part.cases * SCALE)} cases...\n`)
    const result = await runFuzzSession({
      targets: part.targets,
      mix: part.mix,
      cases: part.cases * SCALE,
      seed: seed + i * 1000,
      everythingUpstream: part.everythingUpstream === true,
    })
    if (result.leaked !== undefined && result.leaked.length > 0)
      process.stderr.write(
        `fuzz: ${part.name}: ${result.leaked.length} upstream requests named another owner's objects\n`,
      )
    rows.push({ name: part.name, what: part.what, result })
  }
  const statuses = [...new Set(rows.flatMap((r) => Object.keys(r.result.report.outcomes)))].sort()
  const total = (pick: (r: SessionResult) => number): number => rows.reduce((sum, r) => sum + pick(r.result), 0)
  const failures = rows.flatMap((r) => r.result.report.failures.map((f) => ({ part: r.name, ...f })))
  const lines = [
    '## Fuzz: hostile requests against a running gateway (bench/fuzz.ts)',
    '',
    `The fuzz suite of test/fuzz at ${SCALE} times its CI length (which is 20,000 cases), seed ${seed}`,
    '(`FUZZ_SEED` replays it). Each part runs on a gateway of its own (test/fuzz/gateway.ts:',
    '256 KiB JSON and 1 MiB upload limits, 2 s headers timeout, 1 s body-rate window; half the',
    'chat and embedding models through the openai adapter to an upstream process, half on the',
    'built-in mock), 24 cases in flight over raw keep-alive sockets. A case is one request, or',
    '2-5 pipelined; "replies" counts every response read. The property: every reply is a',
    "success or an error in the contract's shape; no 5xx, no hang, no stack trace, internal",
    'path or secret; the gateway alive, answering /healthz and without an error-level log',
    "line afterwards. Memory is the gateway's heap and buffers after garbage collection,",
    'after a warm-up tenth of the part and at its end.',
    '',
    `| Part | Cases | Replies | s | ${statuses.join(' | ')} | Failures | Heap+buffers before → after (MiB) | /healthz after |`,
    `|---|---|---|---|${statuses.map(() => '---').join('|')}|---|---|---|`,
    ...rows.map(({ name, result: r }) => {
      const mem = (s: { heapUsed: number; arrayBuffers: number }): string =>
        ((s.heapUsed + s.arrayBuffers) / MiB).toFixed(1)
      return `| ${name} | ${fmt(r.report.cases)} | ${fmt(r.report.requests)} | ${(r.report.ms / 1000).toFixed(0)} | ${statuses.map((s) => fmt(r.report.outcomes[s] ?? 0)).join(' | ')} | ${r.report.failures.length + r.errorLogs.length} | ${mem(r.before)} → ${mem(r.after)} | ${r.healthz}${r.exitCode === null ? '' : ` (exited ${r.exitCode})`} |`
    }),
    `| **all** | **${fmt(total((r) => r.report.cases))}** | **${fmt(total((r) => r.report.requests))}** | **${(total((r) => r.report.ms) / 1000).toFixed(0)}** | ${statuses.map((s) => `**${fmt(total((r) => r.report.outcomes[s] ?? 0))}**`).join(' | ')} | **${failures.length + total((r) => r.errorLogs.length)}** | | |`,
    '',
  ]
  if (failures.length > 0) {
    lines.push(
      'Failures (first 10):',
      '',
      ...failures.slice(0, 10).map((f) => `- ${f.part} #${f.index} ${f.target} [${f.tags.join(', ')}]: ${f.problem}`),
      '',
    )
  }
  return lines.join('\n')
}

if (import.meta.main) process.stdout.write((await benchFuzz()) + '\n')
