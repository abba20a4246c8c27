// docs/audit.md names every action the gateway records (src/audit/declarations.ts), every
// route declared not a change, and every field an object's record may keep (src/audit/subjects.ts).
import { readFileSync } from 'node:fs'
import t from 'tap'
import { AUDITED_ROUTES, NOT_CHANGES } from '../../src/audit/declarations.ts'
import * as subjects from '../../src/audit/subjects.ts'

const page = readFileSync('docs/audit.md', 'utf8')
const fieldLists = Object.entries(subjects).filter(([name]) => name.endsWith('_FIELDS')) as Array<
  [string, readonly string[]]
>

t.test('every recorded action is on the page', async (t) => {
  for (const action of new Set(AUDITED_ROUTES.map((r) => r.action))) t.ok(page.includes(`\`${action}\``), action)
})

t.test('every route that is not a change is said so', async (t) => {
  for (const route of NOT_CHANGES) {
    const path = route.path.replace(/:(\w+)/g, '{$1}')
    // A portal route is named as what it does (`sign-in`), an admin route by its path.
    const named = page.includes(path) || page.includes(path.split('/').pop() ?? path)
    t.ok(named, `${route.method} ${route.path}`)
  }
})

t.test("every field of every object's allow-list is on the page", async (t) => {
  t.ok(fieldLists.length >= 7, 'the allow-lists')
  for (const [list, fields] of fieldLists)
    for (const field of fields) t.ok(page.includes(`\`${field}\``), `${list}: ${field}`)
})
