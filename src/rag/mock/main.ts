// The mock RAG backend as a process of its own, standing in for one real service:
//   node src/rag/mock/main.ts --port 0 --service file-manager [--token-delay-ms 20] [--max-file-bytes N]
//     [--status-step-ms 250]   (time between upload and ingestion states; 0: final at once)
// prints {"port": N, "service": "..."} on one line once it listens; SIGTERM stops it.
import { parseArgs } from 'node:util'
import { RAG_SERVICES } from '../../config/schema.ts'
import { DEFAULT_STATUS_STEP_MS, startRagMock } from './server.ts'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
    service: { type: 'string' },
    'token-delay-ms': { type: 'string', default: '20' },
    'max-file-bytes': { type: 'string', default: String(50 * 1024 * 1024) },
    'status-step-ms': { type: 'string', default: String(DEFAULT_STATUS_STEP_MS) },
  },
})
const service = values.service
if (service !== undefined && !(RAG_SERVICES as readonly string[]).includes(service)) {
  process.stderr.write(`--service must be one of: ${RAG_SERVICES.join(', ')}\n`)
  process.exit(2)
}
const running = await startRagMock({
  ...(service === undefined ? {} : { service }),
  tokenDelayMs: Number(values['token-delay-ms']),
  maxFileBytes: Number(values['max-file-bytes']),
  statusStepMs: Number(values['status-step-ms']),
}, Number(values.port), values.host)
process.stdout.write(`${JSON.stringify({ port: running.port, service: service ?? 'all' })}\n`)
const stop = (): void => { void running.close().then(() => process.exit(0)) }
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
