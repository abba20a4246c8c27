// The mock RAG backend as a process of its own, standing in for one real service:
//   npx tollgate rag-mock --port 0 --service file-manager [--host 127.0.0.1] [--token-delay-ms 20]
//     [--max-file-bytes N] [--status-step-ms 250]   (time between upload and ingestion states; 0: final at once)
// prints {"port": N, "service": "..."} on one line once it listens; SIGTERM stops it.
// (`tollgate rag-mock` runs on the pinned Node 24 whatever Node the machine has, as every
// `tollgate` command does; `node src/rag/mock/main.ts` needs Node 24 itself.)
import { parseArgs } from 'node:util'
import { RAG_SERVICES, type RagService } from '../../config/schema.ts'
import { DEFAULT_STATUS_STEP_MS, startRagMock } from './server.ts'

export const RAG_MOCK_USAGE = `Usage: tollgate rag-mock [--port N] [--host H] [--service NAME] [--token-delay-ms N]
                        [--max-file-bytes N] [--status-step-ms N]
Services: ${RAG_SERVICES.join(', ')} (default: all of them)
`

export interface RagMockCommand {
  readonly port: number
  readonly host: string
  readonly service: RagService | undefined
  readonly tokenDelayMs: number
  readonly maxFileBytes: number
  readonly statusStepMs: number
}

/** Parsed and checked; a bad argument throws an Error whose message says which. */
export function parseRagMockArgs(args: readonly string[]): RagMockCommand {
  const { values } = parseArgs({
    args: [...args],
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string', default: '0' },
      host: { type: 'string', default: '127.0.0.1' },
      service: { type: 'string' },
      'token-delay-ms': { type: 'string', default: '20' },
      'max-file-bytes': { type: 'string', default: String(50 * 1024 * 1024) },
      'status-step-ms': { type: 'string', default: String(DEFAULT_STATUS_STEP_MS) },
    },
  })
  const whole = (flag: string, value: string, max = Number.MAX_SAFE_INTEGER): number => {
    if (!/^\d+$/.test(value) || Number(value) > max)
      throw new Error(
        `--${flag} must be a whole number${max < Number.MAX_SAFE_INTEGER ? ` up to ${max}` : ''}, got "${value.slice(0, 20)}"`,
      )
    return Number(value)
  }
  const service = values.service
  if (service !== undefined && !(RAG_SERVICES as readonly string[]).includes(service)) {
    throw new Error(`--service must be one of: ${RAG_SERVICES.join(', ')}`)
  }
  return {
    port: whole('port', values.port, 65535),
    host: values.host,
    service: service as RagService | undefined,
    tokenDelayMs: whole('token-delay-ms', values['token-delay-ms']),
    maxFileBytes: whole('max-file-bytes', values['max-file-bytes']),
    statusStepMs: whole('status-step-ms', values['status-step-ms']),
  }
}

/** Starts it, prints the port line, and stops on SIGTERM or SIGINT. */
export async function runRagMock(options: RagMockCommand): Promise<void> {
  const running = await startRagMock(
    {
      ...(options.service === undefined ? {} : { service: options.service }),
      tokenDelayMs: options.tokenDelayMs,
      maxFileBytes: options.maxFileBytes,
      statusStepMs: options.statusStepMs,
    },
    options.port,
    options.host,
  )
  process.stdout.write(`${JSON.stringify({ port: running.port, service: options.service ?? 'all' })}\n`)
  const stop = (): void => {
    void running.close().then(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}
