// `node src/rag/mock/main.ts …` on Node 24: the same as `npx tollgate rag-mock …` (see cli.ts),
// which is what to run on any other Node.
import { parseRagMockArgs, runRagMock } from './cli.ts'

let options
try {
  options = parseRagMockArgs(process.argv.slice(2))
} catch (err) {
  process.stderr.write(`${(err as Error).message}\n`)
  process.exit(2)
}
await runRagMock(options)
