// npm run bench: runs every benchmark and writes bench/results.md (machine included).
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { benchAdmission } from './admission.ts'
import { machine } from './machine.ts'
import { benchThroughput } from './throughput.ts'

const sections = [await benchAdmission(), await benchThroughput()]
const text = [
  '# Benchmark results',
  '',
  'How to read and rerun these: bench/README.md.',
  '',
  `Written by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}. Machine:`,
  '',
  machine(),
  '',
  ...sections.flatMap((s) => [s, '']),
].join('\n')
writeFileSync(join(import.meta.dirname, 'results.md'), text)
process.stdout.write(text)
