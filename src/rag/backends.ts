// Where each RAG service is: its configured base URL, or the built-in mock, which is
// started here on a loopback port so mock traffic takes the same relay as a real backend.
import http from 'node:http'
import https from 'node:https'
import { RAG_SERVICES, type RagConfig, type RagService } from '../config/schema.ts'
import { startRagMock, type RunningRagMock } from './mock/server.ts'
import type { RelayTarget } from './relay.ts'

export interface RagBackends {
  target(service: RagService): RelayTarget
  /** The in-process mock's address, when a service uses it. */
  readonly mockUrl: string | undefined
  close(): Promise<void>
}

export async function startRagBackends(rag: RagConfig): Promise<RagBackends> {
  const usesMock = RAG_SERVICES.some((s) => rag.services[s].baseUrl === 'mock')
  const mock: RunningRagMock | undefined = usesMock
    ? await startRagMock({ tokenDelayMs: rag.mock.tokenDelayMs, statusStepMs: rag.mock.statusStepMs })
    : undefined
  const targets = new Map<RagService, RelayTarget>()
  for (const service of RAG_SERVICES) {
    const config = rag.services[service]
    const base = new URL(config.baseUrl === 'mock' ? `${mock?.url ?? ''}/${service}` : config.baseUrl)
    const agentOptions = { keepAlive: true, maxSockets: 256 }
    targets.set(service, {
      base,
      agent: base.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
      connectTimeoutMs: config.connectTimeoutMs,
      responseTimeoutMs: config.responseTimeoutMs,
      idleTimeoutMs: config.idleTimeoutMs,
      maxBodyBytes: config.maxBodyBytes,
      service,
    })
  }
  return {
    mockUrl: mock?.url,
    target(service) {
      const target = targets.get(service)
      if (target === undefined) throw new Error(`no RAG service ${service}`)
      return target
    },
    async close() {
      for (const target of targets.values()) target.agent.destroy()
      await mock?.close()
    },
  }
}
