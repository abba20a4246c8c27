// docs/api.md's table of Azure OpenAI paths is the gateway's: every alias it serves
// (src/inference/azure-endpoints.ts) is a row, with its /v2 twin, and no row names a path it
// does not serve (Azure's Responses path was served before the page said so, and the other
// way round is a 404 for whoever reads it).
import { readFileSync } from 'node:fs'
import t from 'tap'
import { AZURE_ENDPOINTS, azureTwinOf } from '../../src/inference/azure-endpoints.ts'

const page = readFileSync('docs/api.md', 'utf8')
const rows = [...page.matchAll(/^\s*\| `(GET|POST|DELETE) (\/v2\/openai\/[^`]+)` \| `([^`]+)` \|/gm)].map(
  ([, method, path, twin]) => ({ alias: `${method} ${path}`, twin }),
)
const served = AZURE_ENDPOINTS.map((spec) => ({
  alias: `${spec.method} /v2${spec.route.replace(/:(\w+)/g, '{$1}')}`,
  twin: `/v2${azureTwinOf(spec.route) ?? '?'}`,
}))

t.ok(
  served.some((s) => s.alias === 'POST /v2/openai/responses'),
  "Azure's Responses path is served",
)
t.same(
  rows.map((r) => r.alias).sort(),
  served.map((s) => s.alias).sort(),
  'the table lists every alias served, and only those',
)
for (const row of rows) t.equal(row.twin, served.find((s) => s.alias === row.alias)?.twin, `${row.alias}: its twin`)
