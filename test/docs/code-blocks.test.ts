// The docs check, static half: every fenced block of README.md, docs/*.md, CHANGELOG.md and
// bench/README.md is what it says it is, and every link resolves. The shell blocks are run by
// test/docs/commands.test.ts; test/docs/checker.test.ts shows this check can fail.
//
// Conventions (docs/development.md, "The docs check"):
// - ```json parses as JSON. A block with `//` comments is ```jsonc, whose whole-line comments
//   are stripped before parsing.
// - ```yaml is a fragment of the gateway configuration: merged over config/default.yaml
//   (mappings merge, lists and scalars replace), it must pass buildConfig, the boot-time
//   validation. YAML that is something else (compose, plans) is marked with
//   `<!-- docs-check: not-config (what it is) -->` on the line before the fence, and only parsed.
// - ```js / ```ts parse as modules (top-level await allowed); they are not type-checked.
// - ```sh / ```bash / ```console and ```js run (commands.test.ts, commands-rag.test.ts) unless
//   marked `<!-- docs-check: skip (why) -->`; the skips are listed here, and kept few.
// - Blocks with no language, or ```text, are pictures and are not read.
// - Links: a relative link names an existing file or folder, an #anchor a heading of its
//   page (GitHub's anchors); an external link is only checked to be a well-formed URL.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import {
  blocksOf,
  checkConfigFragment,
  checkJson,
  checkLinks,
  checkScript,
  checkYaml,
  docFiles,
  JS,
  ROOT,
  SHELL,
  type Problem,
} from './markdown.ts'
import { RUNNABLE } from './run-blocks.ts'

/** Blocks marked `docs-check: skip`: few, each with its reason. */
const MAX_SKIPS = 7

const KNOWN = new Set(['', 'text', 'json', 'jsonc', 'yaml', 'yml', ...JS, ...SHELL])
const files = docFiles()

t.test('the pages the check reads', async (t) => {
  for (const f of ['README.md', 'CHANGELOG.md', 'bench/README.md', 'docs/architecture.md', 'docs/configuration.md'])
    t.ok(files.includes(f), f)
})

t.test('the runnable blocks that are skipped, each with its reason, and those that run', async (t) => {
  const runnable = files
    .flatMap((f) => blocksOf(f, readFileSync(join(ROOT, f), 'utf8')))
    .filter((b) => RUNNABLE.has(b.lang))
  const skipped = runnable.filter((b) => b.skip !== undefined)
  for (const b of skipped) t.comment(`skipped ${b.file}:${b.line}: ${b.skip}`)
  t.ok(skipped.length <= MAX_SKIPS, `${skipped.length} skipped of ${runnable.length} (at most ${MAX_SKIPS})`)
  const run = runnable.filter((b) => b.skip === undefined)
  t.ok(
    run.filter((b) => SHELL.has(b.lang)).length >= 8,
    `${run.filter((b) => SHELL.has(b.lang)).length} shell blocks run`,
  )
  t.ok(
    run.filter((b) => !SHELL.has(b.lang)).length >= 3,
    `${run.filter((b) => !SHELL.has(b.lang)).length} js blocks run`,
  )
})

for (const file of files) {
  t.test(file, async (t) => {
    const text = readFileSync(join(ROOT, file), 'utf8')
    const problems: Problem[] = []
    const counts: Record<string, number> = {}
    for (const b of blocksOf(file, text)) {
      counts[b.lang || 'plain'] = (counts[b.lang || 'plain'] ?? 0) + 1
      if (!KNOWN.has(b.lang))
        problems.push({
          where: `${file}:${b.line}`,
          message: `unknown block language "${b.lang}": name it (json, yaml, sh, js, text, ...)`,
        })
      else if (b.lang === 'json' || b.lang === 'jsonc') problems.push(...checkJson(b))
      else if (b.lang === 'yaml' || b.lang === 'yml') {
        const { problems: p, value } = checkYaml(b)
        problems.push(...p)
        if (p.length === 0 && b.notConfig === undefined) problems.push(...checkConfigFragment(b, value))
      } else if (JS.has(b.lang)) problems.push(...checkScript(b))
    }
    problems.push(...checkLinks(file, text))
    t.comment(`blocks: ${JSON.stringify(counts)}`)
    t.same(problems, [], `${file}: every block and link checks out`)
  })
}
