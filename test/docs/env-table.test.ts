// docs/configuration.md's table of environment variables names every variable the gateway's
// configuration and the `tollgate` command read (the CLI found the gateway by TOLLGATE_URL,
// which no page named).
import { readFileSync, readdirSync } from 'node:fs'
import t from 'tap'

const table = new Set(
  readFileSync('docs/configuration.md', 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split(' | ')[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1] ?? '')),
)

/** The variables a source file reads: `env.NAME`, `env['NAME']`, or the loader's `intFrom('NAME')`. */
function readIn(file: string): string[] {
  const text = readFileSync(file, 'utf8')
  return [
    ...text.matchAll(/\benv(?:\.([A-Z][A-Z0-9_]+)|\[['"]([A-Z][A-Z0-9_]+)['"]\])|intFrom\('([A-Z][A-Z0-9_]+)'\)/g),
  ].map((m) => m[1] ?? m[2] ?? m[3] ?? '')
}

const sources = [
  'src/config/load.ts',
  'src/cli.ts',
  ...readdirSync('src/cli')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `src/cli/${f}`),
]

t.test('every variable the configuration and the CLI read is in the table', async (t) => {
  const read = new Set(sources.flatMap(readIn))
  for (const name of ['PORT', 'TOLLGATE_URL', 'TOLLGATE_ADMIN_TOKEN', 'TOLLGATE_DATA_DIR'])
    t.ok(read.has(name), `the scan finds ${name}`)
  for (const name of read) t.ok(table.has(name), `${name} is in docs/configuration.md's table`)
})
