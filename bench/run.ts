// npm run bench: runs every benchmark and writes bench/results.md (machine included).
// npm run bench -- <name|group>...: runs only those, and replaces only their sections of
// bench/results.md (each then says it was rerun alone, with its own machine line).
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { benchAdmission } from './admission.ts'
import { benchBodyIds } from './body-ids.ts'
import { benchCache } from './cache.ts'
import { benchCapacity } from './capacity.ts'
import { benchCompare, FULL, QUICK } from './compare.ts'
import { benchConcurrentStreams } from './concurrent-streams.ts'
import { benchFuzz } from './fuzz.ts'
import { benchGuardrails } from './guardrails.ts'
import { benchGuardrailsStream } from './guardrails-stream.ts'
import { benchIdleConnections } from './idle-connections.ts'
import { machine } from './machine.ts'
import { benchPortal } from './portal.ts'
import { benchQueue } from './queue.ts'
import { benchStall } from './stall.ts'
import { benchStalledStream } from './stalled-stream.ts'
import { benchStreaming } from './streaming.ts'
import { benchStreamJournal } from './stream-journal.ts'
import { benchThroughput } from './throughput.ts'
import { benchTraces } from './traces.ts'
import { benchTranslation } from './translation.ts'
import { benchUpload } from './upload.ts'
import { benchVectorStore } from './vector-store.ts'
import { benchWorkers } from './workers.ts'

/** In the order a full run takes them; each returns one Markdown section headed "## … (bench/<file>.ts)". */
const BENCHES: Readonly<Record<string, () => Promise<string>>> = {
  compare: () => benchCompare(flags.includes('--quick') ? QUICK : FULL),
  admission: benchAdmission,
  capacity: benchCapacity,
  throughput: benchThroughput,
  workers: benchWorkers,
  streaming: benchStreaming,
  translation: () => benchTranslation(),
  'stream-journal': benchStreamJournal,
  traces: () => benchTraces(),
  'concurrent-streams': benchConcurrentStreams,
  upload: benchUpload,
  queue: benchQueue,
  stall: benchStall,
  'body-ids': benchBodyIds,
  cache: benchCache,
  'vector-store': benchVectorStore,
  'idle-connections': benchIdleConnections,
  'stalled-stream': benchStalledStream,
  fuzz: benchFuzz,
  portal: benchPortal,
  guardrails: () => benchGuardrails(),
  'guardrails-stream': () => benchGuardrailsStream(),
}
const GROUPS: Readonly<Record<string, readonly string[]>> = {
  limits: ['admission', 'throughput'],
  proxy: ['streaming', 'translation', 'concurrent-streams', 'upload'],
  hostile: ['idle-connections', 'stalled-stream', 'fuzz'],
}

const RESULTS = join(import.meta.dirname, 'results.md')
const today = (): string => new Date().toISOString().slice(0, 10)

// Flags (--quick: the short compare, no soak) are not names.
const flags = process.argv.slice(2).filter((a) => a.startsWith('--'))
const args = process.argv.slice(2).filter((a) => !a.startsWith('--'))
const chosen = args.length === 0 ? Object.keys(BENCHES) : [...new Set(args.flatMap((a) => GROUPS[a] ?? [a]))]
const unknown = chosen.filter((name) => !Object.hasOwn(BENCHES, name))
if (unknown.length > 0) {
  process.stderr.write(
    `unknown benchmark ${unknown.join(', ')}; names: ${Object.keys(BENCHES).join(', ')}; groups: ${Object.entries(
      GROUPS,
    )
      .map(([g, n]) => `${g} (${n.join(', ')})`)
      .join(', ')}\n`,
  )
  process.exit(2)
}
const sections: string[] = []
for (const name of Object.keys(BENCHES).filter((n) => chosen.includes(n))) {
  const bench = BENCHES[name]
  if (bench) sections.push(await bench())
}

/** "## Title (bench/x.ts)" → "bench/x.ts": what a section is matched by. */
const sourceOf = (section: string): string =>
  /^## .*\((bench\/[^)]+)\)/.exec(section)?.[1] ?? section.split('\n', 1)[0] ?? ''

let text: string
if (args.length === 0) {
  text = [
    '# Benchmark results',
    '',
    'How to read and rerun these: bench/README.md.',
    '',
    `Written by \`npm run bench\` on ${today()}. Machine:`,
    '',
    machine(),
    '',
    ...sections.flatMap((s) => [s, '']),
  ].join('\n')
} else {
  const note = [
    `Rerun alone (\`npm run bench -- ${[...args, ...flags].join(' ')}\`) on ${today()}, not with the full run the top of this file`,
    'describes. Machine:',
    '',
    machine(),
  ].join('\n')
  // After the heading and its blank line.
  const marked = sections.map((s) => s.replace('\n\n', `\n\n${note}\n\n`))
  const old = readFileSync(RESULTS, 'utf8').trimEnd()
  const at = old.search(/^## /m)
  const head = at === -1 ? old : old.slice(0, at).trimEnd()
  const kept =
    at === -1
      ? []
      : old
          .slice(at)
          .split(/\n(?=## )/)
          .map((s) => s.trimEnd())
  for (const section of marked) {
    const i = kept.findIndex((k) => sourceOf(k) === sourceOf(section))
    if (i === -1) kept.push(section)
    else kept[i] = section
  }
  text = [head, '', ...kept.flatMap((s) => [s, ''])].join('\n')
  process.stdout.write(marked.join('\n\n') + '\n')
}
writeFileSync(RESULTS, text)
if (args.length === 0) process.stdout.write(text)
