// The docs' model list (docs/models.md, section "Models", which the README's map points to) and
// GET /v2/models of a gateway with the default configuration agree: the same names, each with the
// kind the gateway reports (meta_data model_type), so that the docs never name a model the gateway
// does not serve.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'

const README = readFileSync(join(import.meta.dirname, '../../docs/models.md'), 'utf8')
const KIND_OF_TYPE: Record<string, string> = {
  LLM: 'chat',
  EMBEDDING: 'embedding',
  STT: 'audio',
  IMAGE_GENERATION: 'image',
}

/** Rows `| \`name\` | kind | ...` of docs/models.md's "## Models" section, in order. */
function readmeModels(): Array<{ name: string; kind: string }> {
  const start = README.search(/^## Models\s*$/m)
  if (start < 0) return []
  const rest = README.slice(start + 1)
  const end = rest.search(/^## /m)
  const section = end < 0 ? rest : rest.slice(0, end)
  return [...section.matchAll(/^\|\s*`([^`]+)`\s*\|\s*([a-z]+)\s*\|/gm)].map((m) => ({
    name: m[1] ?? '',
    kind: m[2] ?? '',
  }))
}

t.test('docs/models.md lists exactly the models /v2/models lists, with their kinds', async (t) => {
  const listed = readmeModels()
  t.ok(listed.length > 0, 'docs/models.md has a "## Models" section with a table of `name` | kind rows')
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey()
  const res = await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}` } })
  const served = ((await res.json()) as { data: Array<{ id: string; meta_data: { model_type: string } }> }).data
  t.same(listed.map((m) => m.name).sort(), served.map((m) => m.id).sort(), 'the same names')
  t.equal(new Set(listed.map((m) => m.name)).size, listed.length, 'each once')
  const kinds = new Map(served.map((m) => [m.id, KIND_OF_TYPE[m.meta_data.model_type]]))
  for (const { name, kind } of listed) t.equal(kind, kinds.get(name), `${name}: ${kind}`)
})
