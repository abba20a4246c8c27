// Where each RAG service is: its configured base URL, or the built-in mock, which is
// started here on a Unix socket of its own (no port) so mock traffic takes the same relay
// as a real backend.
// A reload builds the next set beside the running one (`previous`): a service whose
// settings did not change keeps its target and connections, the mock keeps running (it is
// started at most once, by the first configuration that names it), and `retire` lets go of
// what the next set no longer uses once the calls on the previous one are done.
import { http } from '../http/node-http.ts'
import https from 'node:https'
import { RAG_SERVICES, type RagConfig, type RagService, type RagServiceConfig } from '../config/schema.ts'
import { startLazyRagMock } from './mock/lazy.ts'
import type { MockListener } from './mock/listener.ts'
import type { RelayTarget } from './relay.ts'

export interface RagBackends {
  target(service: RagService): RelayTarget
  /** The in-process mock's address (`unix:<socket>`), when a service uses it. */
  readonly mockUrl: string | undefined
  /** Destroys the connections of the targets `next` does not share (the mock stays). */
  retire(next: RagBackends): void
  /** Everything, the mock included: at shutdown, on the set in force. */
  close(): Promise<void>
}

interface Built {
  readonly settings: RagServiceConfig
  readonly target: RelayTarget
}

const builtSets = new WeakMap<RagBackends, { readonly built: Map<RagService, Built>; readonly mock?: MockListener }>()

export async function startRagBackends(rag: RagConfig, previous?: RagBackends): Promise<RagBackends> {
  const before = previous === undefined ? undefined : builtSets.get(previous)
  const usesMock = RAG_SERVICES.some((s) => rag.services[s].baseUrl === 'mock')
  const mock: MockListener | undefined =
    before?.mock ??
    (usesMock
      ? await startLazyRagMock({ tokenDelayMs: rag.mock.tokenDelayMs, statusStepMs: rag.mock.statusStepMs })
      : undefined)
  const built = new Map<RagService, Built>()
  for (const service of RAG_SERVICES) {
    const settings = rag.services[service]
    const kept = before?.built.get(service)
    if (kept !== undefined && JSON.stringify(kept.settings) === JSON.stringify(settings)) {
      built.set(service, kept)
      continue
    }
    const onMock = settings.baseUrl === 'mock'
    const base = new URL(onMock ? `${mock?.url ?? ''}/${service}` : settings.baseUrl)
    // The mock listens on a Unix socket: its agent connects there, whatever the URL's host.
    const socketPath = onMock ? mock?.socketPath : undefined
    const agentOptions = { keepAlive: true, maxSockets: 256, ...(socketPath === undefined ? {} : { socketPath }) }
    built.set(service, {
      settings,
      target: {
        base,
        agent: base.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions),
        connectTimeoutMs: settings.connectTimeoutMs,
        responseTimeoutMs: settings.responseTimeoutMs,
        idleTimeoutMs: settings.idleTimeoutMs,
        maxBodyBytes: settings.maxBodyBytes,
        service,
      },
    })
  }
  const backends: RagBackends = {
    mockUrl: mock === undefined ? undefined : mock.socketPath === undefined ? mock.url : `unix:${mock.socketPath}`,
    target(service) {
      const found = built.get(service)
      if (found === undefined) throw new Error(`no RAG service ${service}`)
      return found.target
    },
    retire(next) {
      const kept = new Set([...(builtSets.get(next)?.built.values() ?? [])].map((b) => b.target))
      for (const { target } of built.values()) if (!kept.has(target)) target.agent.destroy()
    },
    async close() {
      for (const { target } of built.values()) target.agent.destroy()
      await mock?.close()
    },
  }
  builtSets.set(backends, { built, ...(mock === undefined ? {} : { mock }) })
  return backends
}
