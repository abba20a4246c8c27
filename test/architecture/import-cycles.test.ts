// No runtime import cycles between the files of src/. A cycle means two rooms each need the
// other loaded first: whichever Node evaluates second sees the first half-built (a `const`
// still in its temporal dead zone), and the order depends on which file a caller happens to
// import. Shared plumbing belongs in a leaf module that both import instead (STYLE.md).
//
// The graph is what Node loads: every `import`/`export … from` is an edge, including one
// whose named specifiers are all `type` (Node's type stripping keeps such an import, so
// the module is still evaluated); only `import type` / `export type` is erased. Dynamic
// `import('./x.ts')` with a literal and `new URL('./x.ts', import.meta.url)` (a worker's
// entry) count too.
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import ts from 'typescript'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..')
const SRC = join(ROOT, 'src')

/** The relative specifiers a module loads at run time (type-only imports and exports left out). */
export function runtimeSpecifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const found: string[] = []
  const literal = (node: ts.Node | undefined): void => {
    if (node !== undefined && ts.isStringLiteralLike(node)) found.push(node.text)
  }
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node)) {
      if (node.importClause?.isTypeOnly !== true) literal(node.moduleSpecifier)
    } else if (ts.isImportEqualsDeclaration(node)) {
      if (!node.isTypeOnly && ts.isExternalModuleReference(node.moduleReference))
        literal(node.moduleReference.expression)
    } else if (ts.isExportDeclaration(node)) {
      if (!node.isTypeOnly) literal(node.moduleSpecifier)
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      literal(node.arguments[0])
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'URL') {
      // new URL('./worker.ts', import.meta.url): a module the file starts (a worker).
      const [target, base] = node.arguments ?? []
      if (
        base !== undefined &&
        base.getText(source) === 'import.meta.url' &&
        target !== undefined &&
        ts.isStringLiteralLike(target) &&
        /\.[cm]?ts$/.test(target.text)
      )
        found.push(target.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found.filter((specifier) => specifier.startsWith('./') || specifier.startsWith('../'))
}

/** file → the files it loads, for every .ts file under `dir` (edges to files outside it are dropped). */
export function importGraph(dir: string): Map<string, string[]> {
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
    .map((name) => join(dir, name))
  const known = new Set(files)
  const graph = new Map<string, string[]>()
  for (const file of files) {
    const targets = runtimeSpecifiers(file, readFileSync(file, 'utf8'))
      .map((specifier) => resolve(dirname(file), specifier))
      .filter((target) => known.has(target))
    graph.set(file, [...new Set(targets)])
  }
  return graph
}

/**
 * The import cycles of a graph: its strongly connected components of more than one file,
 * and any file that imports itself (Tarjan's algorithm, iterative so a deep chain cannot
 * overflow the stack). Each cycle's files are sorted, and the cycles by their first file.
 */
export function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const cycles: string[][] = []
  let next = 0
  for (const start of graph.keys()) {
    if (index.has(start)) continue
    const frames: Array<{ node: string; edge: number }> = [{ node: start, edge: 0 }]
    index.set(start, next)
    low.set(start, next++)
    stack.push(start)
    onStack.add(start)
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!
      const edges = graph.get(frame.node) ?? []
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++]!
        if (!index.has(to)) {
          index.set(to, next)
          low.set(to, next++)
          stack.push(to)
          onStack.add(to)
          frames.push({ node: to, edge: 0 })
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!))
        }
        continue
      }
      frames.pop()
      const parent = frames[frames.length - 1]
      if (parent !== undefined) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!))
      if (low.get(frame.node) !== index.get(frame.node)) continue
      const component: string[] = []
      for (;;) {
        const member = stack.pop()!
        onStack.delete(member)
        component.push(member)
        if (member === frame.node) break
      }
      if (component.length > 1 || (graph.get(frame.node) ?? []).includes(frame.node)) cycles.push(component.sort())
    }
  }
  return cycles.sort((a, b) => (a[0]! < b[0]! ? -1 : a[0]! > b[0]! ? 1 : 0))
}

t.test('the cycle finder', async (t) => {
  const graph = (edges: Record<string, string[]>): Map<string, string[]> => new Map(Object.entries(edges))
  t.same(findCycles(graph({ a: ['b'], b: ['c'], c: [] })), [], 'a chain has none')
  t.same(findCycles(graph({ a: ['b', 'c'], b: ['d'], c: ['d'], d: [] })), [], 'a diamond has none')
  t.same(findCycles(graph({ a: ['b'], b: ['a'] })), [['a', 'b']], 'two files that import each other')
  t.same(findCycles(graph({ a: ['a'] })), [['a']], 'a file that imports itself')
  t.same(
    findCycles(graph({ x: ['a'], a: ['b'], b: ['c'], c: ['a', 'd'], d: ['e'], e: ['d'] })),
    [
      ['a', 'b', 'c'],
      ['d', 'e'],
    ],
    'each cycle on its own, the files leading into them left out',
  )
  // The shape of issue #21's cycles: an adapter and its half, each importing the other.
  t.same(
    findCycles(
      graph({
        'embedded.ts': ['embedded-auth.ts', 'ports.ts'],
        'embedded-auth.ts': ['embedded.ts', 'ports.ts'],
        'ports.ts': [],
      }),
    ),
    [['embedded-auth.ts', 'embedded.ts']],
  )
  const long = new Map(Array.from({ length: 20_000 }, (_, i) => [`m${i}`, [`m${(i + 1) % 20_000}`]]))
  t.equal(findCycles(long)[0]?.length, 20_000, 'a long ring is found without overflowing the stack')
})

t.test('what counts as a runtime import', async (t) => {
  const text = [
    "import type { A } from './type-only.ts'",
    "import { type B } from './inline-type.ts'",
    "import { c } from './value.ts'",
    "import './side-effect.ts'",
    "export type { D } from './type-export.ts'",
    "export { e } from './re-export.ts'",
    "export * from './star.ts'",
    "import { f } from 'node:fs'",
    "const g = await import('./dynamic.ts')",
    "new Worker(new URL('./worker.ts', import.meta.url))",
    "const page = new URL('./page.html', import.meta.url)",
  ].join('\n')
  t.same(runtimeSpecifiers('x.ts', text).sort(), [
    './dynamic.ts',
    './inline-type.ts',
    './re-export.ts',
    './side-effect.ts',
    './star.ts',
    './value.ts',
    './worker.ts',
  ])
})

t.test('src/ has no runtime import cycle', async (t) => {
  const cycles = findCycles(importGraph(SRC))
  const named = cycles.map((files) => files.map((file) => relative(ROOT, file)).join(' ↔ '))
  t.same(named, [], `runtime import cycles:\n${named.join('\n')}`)
})

// The leaves of store/ that the adapters of every room share: they stay leaves, loading
// nothing but one another and the files below (else an adapter that imports one could
// close a cycle again).
const LEAVES = [
  'store/redis-client.ts',
  'store/redis-kit.ts',
  'store/redis-subscription.ts',
  'store/redis-turn-writes.ts',
  'store/sqlite.ts',
]
const LEAF_DEPENDENCIES = ['store/errors.ts', 'store/data-dir.ts', 'turn-batches.ts']

t.test('the store leaves load nothing but leaves', async (t) => {
  const graph = importGraph(SRC)
  const allowed = new Set([...LEAVES, ...LEAF_DEPENDENCIES].map((file) => join(SRC, file)))
  for (const leaf of LEAVES) {
    const imports = graph.get(join(SRC, leaf))
    t.ok(imports, `${leaf} exists`)
    t.same(
      (imports ?? []).filter((file) => !allowed.has(file)).map((file) => relative(SRC, file)),
      [],
      `${leaf} imports only leaves`,
    )
  }
  for (const file of LEAF_DEPENDENCIES) t.same(graph.get(join(SRC, file)), [], `${file} imports no file of src/`)
})
