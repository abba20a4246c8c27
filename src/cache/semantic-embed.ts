// The prompt's embedding, asked of the configured embedding model through the gateway's own
// corridor as an embeddings call of the caller's key: its scopes checked (a key that may not
// use the embedding model gets no semantic lookup), admitted by the key's limits and budgets,
// sent to the model's deployments with failover, metered to the key (its requests, tokens
// and cost, like any embeddings call). The reply goes to a recorder, not to the client. A
// refusal or failure on the way is no vector: the call is then looked up exactly only.
import type { Corridor } from '../inference/corridor.ts'
import type { Exchange, PreparedCall } from '../inference/call.ts'
import { PROXIED_ENDPOINTS } from '../inference/endpoints.ts'
import { limiterStrategy } from '../inference/live.ts'
import { estimateUsage } from '../limits/estimate.ts'
import type { Limiter } from '../limits/port.ts'
import { detachedClient } from '../proxy/detached-client.ts'
import { RecordingSink } from '../proxy/recorder.ts'
import { unit } from './semantic-index.ts'

/** Largest embeddings reply read (8192 floats as JSON text are ~200 KB). */
const MAX_REPLY_BYTES = 4 * 1024 * 1024
/** Widest vector kept: wider ones are refused rather than stored. */
export const MAX_DIMENSIONS = 8192

const EMBEDDINGS = PROXIED_ENDPOINTS.find((s) => s.endpoint === 'embeddings' && s.method === 'POST')

export interface EmbedDeps {
  readonly limiter: Limiter
  readonly corridor: Pick<Corridor, 'run' | 'restore'>
}

export type Embedded = { readonly vector: Float32Array } | { readonly failed: string }

export async function embed(
  deps: EmbedDeps,
  call: PreparedCall,
  exchange: Exchange,
  model: string,
  text: string,
): Promise<Embedded> {
  if (EMBEDDINGS === undefined) return { failed: 'no embeddings endpoint' }
  const { runtime } = call
  const route = runtime.registry.model(model)
  if (route === undefined || route.config.kind !== 'embedding') return { failed: 'not an embedding model' }
  const value = { model, input: text, encoding_format: 'float' }
  const estimate = estimateUsage('embeddings', value, {
    defaultMaxTokens: runtime.config.defaultMaxTokens,
    contextTokens: route.config.contextTokens,
  })
  const recorder = new RecordingSink(MAX_REPLY_BYTES)
  try {
    const nested = deps.corridor.restore(call.principal, EMBEDDINGS, {
      params: {},
      query: new URLSearchParams(),
      body: { kind: 'json', value },
      modelName: model,
      estimate,
    })
    const result = await deps.corridor.run(
      nested,
      {
        id: `${exchange.id}.embed`,
        log: exchange.log,
        signal: exchange.signal,
        sink: recorder,
        client: detachedClient('POST', EMBEDDINGS.upstreamPath({})),
        notes: {},
        ...(exchange.trace === undefined ? {} : { trace: exchange.trace }),
      },
      limiterStrategy(deps.limiter),
    )
    const recording = recorder.recording()
    if (result.status !== 200 || !recording.complete || recording.truncated)
      return { failed: `status ${result.status}` }
    return vectorOf(JSON.parse(recording.body.toString('utf8')) as unknown)
  } catch (err) {
    return { failed: (err as Error).message }
  }
}

function vectorOf(reply: unknown): Embedded {
  const data = (reply as { data?: unknown } | null)?.data
  const first: unknown = Array.isArray(data) ? data[0] : undefined
  const values = (first as { embedding?: unknown } | undefined)?.embedding
  if (!Array.isArray(values) || values.length === 0 || values.length > MAX_DIMENSIONS) return { failed: 'no vector' }
  if (!values.every((v) => typeof v === 'number')) return { failed: 'no vector' }
  const vector = unit(values)
  return vector === undefined ? { failed: 'a zero vector' } : { vector }
}
