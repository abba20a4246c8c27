// The docs check's reading side: the fenced code blocks of a markdown file (with the
// `docs-check` marks before them), its links, and its headings as GitHub turns them into
// anchors. Pure functions over text, so the checker itself can be tested on bad samples
// (test/docs/checker.test.ts) before it is trusted with the real pages.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import ts from 'typescript'
import { parse as parseYaml } from 'yaml'
import { buildConfig } from '../../src/config/load.ts'

export const ROOT = resolve(import.meta.dirname, '../..')

/**
 * The pages the check reads. docs/INTERFACE.md is the contract, kept as agreed: it is checked
 * too, since it passes; the portal screenshots and other files are only link targets.
 */
export function docFiles(): string[] {
  const docs = readDirMd(join(ROOT, 'docs'))
  return ['README.md', 'CHANGELOG.md', 'bench/README.md', ...docs].filter((f) => existsSync(join(ROOT, f)))
}

/** docs/ is flat, one page per concern. */
function readDirMd(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => relative(ROOT, join(dir, f)))
}

export interface Block {
  readonly file: string
  /** 1-based line of the opening fence. */
  readonly line: number
  /** The info string's first word, lower case ('' when none). */
  readonly lang: string
  readonly code: string
  /** The reason of a `<!-- docs-check: skip (reason) -->` right before the fence, if any. */
  readonly skip?: string
  /** The reason of a `<!-- docs-check: not-config (what it is) -->`: YAML that is not gateway configuration. */
  readonly notConfig?: string
}

const MARK = /^<!--\s*docs-check:\s*(skip|not-config)\s*\((.+)\)\s*-->\s*$/

/** Every fenced block (``` or ~~~) of a markdown text, in order. */
export function blocksOf(file: string, text: string): Block[] {
  const lines = text.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i] ?? '')
    if (!open) continue
    const fence = open[2] ?? '```'
    const body: string[] = []
    let j = i + 1
    for (; j < lines.length; j++) {
      const line = lines[j] ?? ''
      if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') break
      body.push(line)
    }
    // The mark may stand on the line before the fence, or before one blank line.
    let k = i - 1
    if (k >= 0 && (lines[k] ?? '').trim() === '') k--
    const mark = k >= 0 ? MARK.exec((lines[k] ?? '').trim()) : null
    const marked = mark ? { [mark[1] === 'skip' ? 'skip' : 'notConfig']: mark[2] } : {}
    blocks.push({ file, line: i + 1, lang: (open[3] ?? '').toLowerCase(), code: body.join('\n'), ...marked })
    i = j
  }
  return blocks
}

export const SHELL = new Set(['sh', 'bash', 'shell', 'console', 'zsh'])
export const JS = new Set(['js', 'mjs', 'javascript', 'ts', 'typescript'])

/** A problem with a block or a link, as the test reports it. */
export interface Problem {
  readonly where: string
  readonly message: string
}

const at = (b: Block): string => `${b.file}:${b.line}`

/** ```json parses as JSON; ```jsonc may carry whole-line `//` comments, which are stripped first. */
export function checkJson(b: Block): Problem[] {
  const text =
    b.lang === 'jsonc'
      ? b.code
          .split('\n')
          .filter((l) => !/^\s*\/\//.test(l))
          .join('\n')
      : b.code
  try {
    JSON.parse(text)
    return []
  } catch (err) {
    return [{ where: at(b), message: `${b.lang} does not parse: ${(err as Error).message}` }]
  }
}

/** ```yaml parses; what it holds is returned for the config check. */
export function checkYaml(b: Block): { problems: Problem[]; value?: unknown } {
  try {
    return { problems: [], value: parseYaml(b.code) as unknown }
  } catch (err) {
    return { problems: [{ where: at(b), message: `yaml does not parse: ${(err as Error).message.split('\n')[0]}` }] }
  }
}

/** ```js / ```ts parse as a module (top-level await allowed): syntax only, no types. */
export function checkScript(b: Block): Problem[] {
  const ext = b.lang.startsWith('t') ? 'ts' : 'mjs'
  const out = ts.transpileModule(b.code, {
    fileName: `block.${ext}`,
    reportDiagnostics: true,
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ESNext },
  })
  return (out.diagnostics ?? []).map((d) => ({
    where: at(b),
    message: `${b.lang} does not parse: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
  }))
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
export function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  let fenced = false
  for (const line of text.split('\n')) {
    if (/^\s*(`{3,}|~{3,})/.test(line)) fenced = !fenced
    if (fenced) continue
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!m) continue
    const base = (m[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

/** `[text](target)` and `![alt](target)` outside code, with their lines. */
export function linksOf(text: string): Array<{ line: number; target: string }> {
  const links: Array<{ line: number; target: string }> = []
  let fenced = false
  text.split('\n').forEach((raw, i) => {
    if (/^\s*(`{3,}|~{3,})/.test(raw)) {
      fenced = !fenced
      return
    }
    if (fenced) return
    // A link may have code in its text ([`docs/INTERFACE.md`](INTERFACE.md)); a link inside a
    // code span is not one.
    const spans = [...raw.matchAll(/`[^`]*`/g)].map((m) => [m.index, m.index + m[0].length] as const)
    for (const m of raw.matchAll(/!?\[(?:[^\]`]|`[^`]*`)*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (spans.some(([from, to]) => m.index > from && m.index < to)) continue
      links.push({ line: i + 1, target: m[1] ?? '' })
    }
  })
  return links
}

/**
 * Every link of `file` (its text given) resolves: a relative path to an existing file or
 * folder, an #anchor to a heading of the page it names; an external link only has to be a
 * well-formed http(s) or mailto URL (no network here).
 */
export function checkLinks(
  file: string,
  text: string,
  read: (path: string) => string | undefined = readIfExists,
): Problem[] {
  const problems: Problem[] = []
  for (const { line, target } of linksOf(text)) {
    const where = `${file}:${line}`
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      let ok: boolean
      try {
        ok = ['http:', 'https:', 'mailto:'].includes(new URL(target).protocol)
      } catch {
        ok = false
      }
      if (!ok) problems.push({ where, message: `not a well-formed external link: ${target}` })
      continue
    }
    const [path = '', anchor] = target.split('#', 2)
    const to = path === '' ? file : join(dirname(file), decodeURIComponent(path))
    if (relative(ROOT, resolve(ROOT, to)).startsWith('..')) {
      problems.push({ where, message: `leaves the repository: ${target}` })
      continue
    }
    const content = read(to)
    if (content === undefined) {
      problems.push({ where, message: `no such file: ${target} (${to})` })
      continue
    }
    if (anchor !== undefined && anchor !== '') {
      if (!to.endsWith('.md')) {
        problems.push({ where, message: `an anchor into a file that is not markdown: ${target}` })
        continue
      }
      if (!anchorsOf(content).has(anchor)) problems.push({ where, message: `no heading for #${anchor} in ${to}` })
    }
  }
  return problems
}

/** A file's text; '' for a folder (it exists, and has no headings); undefined when absent. */
function readIfExists(path: string): string | undefined {
  const full = join(ROOT, path)
  if (!existsSync(full)) return undefined
  try {
    return readFileSync(full, 'utf8')
  } catch {
    return ''
  }
}

type Doc = Record<string, unknown>
const isMapping = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v)

/** Mappings merge key by key; lists and scalars replace: how a fragment reads over the defaults. */
export function mergeOver(base: unknown, fragment: unknown): unknown {
  if (!isMapping(base) || !isMapping(fragment)) return fragment
  const out: Doc = { ...base }
  for (const [k, v] of Object.entries(fragment)) out[k] = mergeOver(base[k], v)
  return out
}

/**
 * A ```yaml block is a fragment of the gateway's configuration: merged over
 * config/default.yaml, it must pass the same validation as a file at boot (buildConfig:
 * the schema, the plans it names, cross-references such as a deployment's backend).
 */
export function checkConfigFragment(b: Block, value: unknown): Problem[] {
  if (!isMapping(value))
    return [
      { where: at(b), message: 'a yaml block of gateway configuration must be a mapping (else mark it not-config)' },
    ]
  const path = join(ROOT, 'config/default.yaml')
  const defaults = parseYaml(readFileSync(path, 'utf8')) as unknown
  try {
    // TOLLGATE_DLP_SECRET: the signing secret docs/guardrails.md's webhook check names.
    buildConfig(mergeOver(defaults, value), path, {
      OPENAI_API_KEY: 'sk-docs-check',
      TOLLGATE_DLP_SECRET: 'whsec_ZG9jcy1jaGVjaw==',
    })
    return []
  } catch (err) {
    return [
      { where: at(b), message: `not valid gateway configuration over config/default.yaml: ${(err as Error).message}` },
    ]
  }
}
