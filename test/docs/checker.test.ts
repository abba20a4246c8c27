// The docs check can fail: each of its checks, given a bad sample, reports it (and a good
// one passes), so a green docs check means the pages were read, not skipped.
import t from 'tap'
import {
  anchorsOf,
  blocksOf,
  checkConfigFragment,
  checkJson,
  checkLinks,
  checkScript,
  checkYaml,
  linksOf,
} from './markdown.ts'

const page = [
  '# A page',
  '## Queue: wait for capacity instead of a 429',
  '```json',
  '{"a": 1,}',
  '```',
  '```jsonc',
  '// a comment',
  '{"a": 1}',
  '```',
  '<!-- docs-check: skip (needs docker) -->',
  '',
  '```sh',
  'docker compose up',
  '```',
  '```yaml',
  'server: { port: [',
  '```',
  '```yaml',
  'server: { port: 99999 }',
  '```',
  '```yaml',
  'backends: { b: { type: openai, baseUrl: http://127.0.0.1:9/v1 } }',
  '```',
  '```js',
  'const x = await fetch(',
  '```',
  '[ok](#queue-wait-for-capacity-instead-of-a-429) [bad anchor](#nowhere) [gone](nope.md) [ext](https://example.com/x) [bad ext](https://[bad) `[not](a-link.md)`',
].join('\n')

const blocks = blocksOf('sample.md', page)

t.test('blocks are found with their language, line and marks', async (t) => {
  t.same(
    blocks.map((b) => b.lang),
    ['json', 'jsonc', 'sh', 'yaml', 'yaml', 'yaml', 'js'],
  )
  t.equal(blocks[0]?.line, 3)
  t.equal(blocks[2]?.skip, 'needs docker', 'a skip mark, one blank line before the fence, is read')
  t.equal(blocks[0]?.skip, undefined)
})

t.test('bad JSON fails, JSONC with comments passes', async (t) => {
  t.equal(checkJson(blocks[0]!).length, 1)
  t.same(checkJson(blocks[1]!), [])
})

t.test('YAML that does not parse fails; YAML that is bad configuration fails; good configuration passes', async (t) => {
  t.equal(checkYaml(blocks[3]!).problems.length, 1)
  const bad = checkYaml(blocks[4]!)
  t.same(bad.problems, [])
  t.match(checkConfigFragment(blocks[4]!, bad.value)[0]?.message ?? '', /server\.port/)
  t.same(checkConfigFragment(blocks[5]!, checkYaml(blocks[5]!).value), [])
})

t.test('a script that does not parse fails', async (t) => {
  t.equal(checkScript(blocks[6]!).length > 0, true)
  t.same(
    checkScript({ ...blocks[6]!, code: "import OpenAI from 'openai'\nconst r = await new OpenAI().models.list()" }),
    [],
  )
})

t.test('links: a missing file, a missing anchor and a malformed URL fail; code spans are not links', async (t) => {
  t.equal(linksOf(page).length, 5)
  const problems = checkLinks('docs/sample.md', page, (p) => (p === 'docs/sample.md' ? page : undefined))
  t.same(
    problems.map((p) => p.message.split(':')[0]),
    ['no heading for #nowhere in docs/sample.md', 'no such file', 'not a well-formed external link'],
  )
})

t.test("anchors are GitHub's", async (t) => {
  const a = anchorsOf(
    '# Vector stores (`/v1`)\n## RAG gateway: `/<service>/<route…>`\n### `meta_data`\n## Twice\n## Twice\n```\n# not a heading\n```',
  )
  t.same([...a], ['vector-stores-v1', 'rag-gateway-serviceroute', 'meta_data', 'twice', 'twice-1'])
})
