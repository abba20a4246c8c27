// docs/troubleshooting.md against what the gateway says: every entry of the error table
// (src/errors.ts) has its row, with the status and what a client sees, and every message the
// page quotes is one the code prints (a quoted message that no longer exists sent readers
// looking for a line that never came).
import { readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { ERRORS } from '../../src/errors.ts'

const page = readFileSync('docs/troubleshooting.md', 'utf8')

/** Every source file's text: where a message the gateway prints must be found. */
function sourceText(dir: string): string {
  return readdirSync(dir)
    .map((name) => join(dir, name))
    .map((path) =>
      statSync(path).isDirectory() ? sourceText(path) : path.endsWith('.ts') ? readFileSync(path, 'utf8') : '',
    )
    .join('\n')
}
const sources = `${sourceText('src')}\n${readFileSync('bin/tollgate', 'utf8')}`

// Quoted on the page, printed by other programs than Tollgate: what each is.
const NOT_OURS: Record<string, string> = {
  'TypeError [ERR_UNKNOWN_FILE_EXTENSION]: Unknown file extension ".ts" for': 'Node older than 24',
  EBADENGINE: 'npm install',
}

t.test('every entry of the error table has its row', async (t) => {
  const rows = new Map(
    page
      .split('\n')
      .filter((line) => line.startsWith('| '))
      .map((line) => line.split(' | ').map((cell) => cell.replace(/^\| |\s\|$/g, '')))
      .map((cells) => [cells[2] ?? '', cells] as const),
  )
  for (const [name, spec] of Object.entries(ERRORS)) {
    const row = rows.get(`\`${name}\``)
    t.ok(row, `${name} is on the page`)
    if (row === undefined) continue
    t.equal(row[0], String(spec.status), `${name}: its status`)
    const sees = 'code' in spec && spec.code !== null ? `\`${spec.code}\`` : `"${spec.message}"`
    t.equal(row[1], sees, `${name}: what a client sees`)
    t.ok((row[3] ?? '').length > 10, `${name}: what to do`)
  }
})

t.test('every message the page quotes is one the gateway prints', async (t) => {
  const quoted = [...page.matchAll(/^- \*\*`([^`]+)`/gm)].map((m) => m[1] ?? '')
  t.ok(quoted.length >= 5, `messages quoted (${quoted.length})`)
  for (const message of quoted) {
    if (Object.keys(NOT_OURS).some((start) => message.startsWith(start))) continue
    // `…` stands for what varies (a path, a pid): each part between is printed as written.
    for (const part of message
      .split('…')
      .map((p) => p.trim())
      .filter((p) => p.length > 0))
      t.ok(sources.includes(part), `"${part}" is printed by the gateway (quoted as "${message}")`)
  }
  t.notOk(page.includes('REDIS_URL is set but TOLLGATE_KEY_SECRET is not'), 'not the message it no longer prints')
})
