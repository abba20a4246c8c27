// Traces off cost nothing: no module the gateway loads statically (the CLI, the composition root) imports
// OpenTelemetry. The SDK's adapter is reached only through main.ts's dynamic import, when
// tracing.enabled (and that adapter does import the SDK: the check is not vacuous).
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import t from 'tap'
import ts from 'typescript'

const SRC = resolve(import.meta.dirname, '../../src')

/** The specifiers a module imports statically at run time (type-only ones are erased; dynamic import() left out). */
function staticImports(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  for (const node of source.statements) {
    // `import { type X }` is kept by Node's type stripping (the module is still loaded); only `import type` goes.
    if (ts.isImportDeclaration(node) && node.importClause?.isTypeOnly !== true) {
      found.push((node.moduleSpecifier as ts.StringLiteral).text)
    } else if (ts.isExportDeclaration(node) && !node.isTypeOnly && node.moduleSpecifier !== undefined) {
      found.push((node.moduleSpecifier as ts.StringLiteral).text)
    }
  }
  return found
}

function staticGraph(...entries: string[]): { files: Set<string>; packages: Set<string> } {
  const files = new Set<string>()
  const packages = new Set<string>()
  const walk = (file: string): void => {
    if (files.has(file)) return
    files.add(file)
    for (const specifier of staticImports(file)) {
      if (specifier.startsWith('.')) {
        const target = resolve(dirname(file), specifier)
        if (target.endsWith('.ts')) walk(target)
      } else packages.add(specifier)
    }
  }
  for (const entry of entries) walk(entry)
  return { files, packages }
}

t.test('nothing loaded statically imports OpenTelemetry; the adapter is loaded on demand', async (t) => {
  const { files, packages } = staticGraph(join(SRC, 'cli.ts'), join(SRC, 'main.ts'))
  t.ok(
    files.has(join(SRC, 'main.ts')) && files.has(join(SRC, 'inference/corridor.ts')),
    'the walk reaches the corridor',
  )
  t.same(
    [...packages].filter((p) => p.startsWith('@opentelemetry/')),
    [],
    'no statically loaded module imports an @opentelemetry package',
  )
  t.notOk(files.has(join(SRC, 'observability/otel.ts')), 'the adapter is not among them')
  t.match(
    readFileSync(join(SRC, 'main.ts'), 'utf8'),
    /await import\('\.\/observability\/otel\.ts'\)/,
    'main.ts imports it dynamically',
  )
  t.ok(
    staticImports(join(SRC, 'observability/otel.ts')).includes('@opentelemetry/sdk-trace-base'),
    'and it is the one that brings the SDK',
  )
})
