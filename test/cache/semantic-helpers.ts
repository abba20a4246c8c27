// The semantic cache's test rig: an OpenAI-compatible embeddings upstream on loopback whose
// vectors the test chooses per input text, and a gateway whose embedding model is served by
// it (the chat models stay on the mock, which writes a fresh id into every reply).
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { startTollgate, type RunningTollgate, type StartOptions } from '../helpers/gateway.ts'
import { cachedPlans, type StoreKind } from './helpers.ts'

export const EMBEDDER = 'jina-embeddings-v2-base-de'
/** What the fake reports per embeddings call. */
export const EMBED_TOKENS = 7

export interface FakeEmbedder {
  readonly url: string
  /** The vector each input text gets; a text not listed gets `fallback(text)`. */
  readonly vectors: Map<string, number[]>
  /** Inputs received, in order. */
  readonly inputs: string[]
  close(): Promise<void>
}

/** A text not chosen gets a vector of its own: one-hot on a dimension taken from its characters (dims 8..63). */
function fallback(text: string, dims: number): number[] {
  let h = 0
  for (const ch of text) h = (h * 31 + ch.charCodeAt(0)) >>> 0
  const out = new Array<number>(dims).fill(0)
  out[8 + (h % (dims - 8))] = 1
  return out
}

export async function startFakeEmbedder(dims = 64): Promise<FakeEmbedder> {
  const vectors = new Map<string, number[]>()
  const inputs: string[] = []
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { input?: unknown; model?: string }
      if (!req.url?.endsWith('/embeddings') || typeof body.input !== 'string') {
        res.writeHead(400, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: 'only one string input', type: 'invalid_request_error' } }))
        return
      }
      inputs.push(body.input)
      const embedding = vectors.get(body.input) ?? fallback(body.input, dims)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(
        JSON.stringify({
          object: 'list',
          model: body.model,
          data: [{ object: 'embedding', index: 0, embedding }],
          usage: { prompt_tokens: EMBED_TOKENS, total_tokens: EMBED_TOKENS },
        }),
      )
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/v1`,
    vectors,
    inputs,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

export interface SemanticGatewayOptions {
  readonly store: StoreKind
  readonly redis?: StartOptions
  readonly embedder: FakeEmbedder
  /** The tier's `semantic` (default: on, the fake's model, threshold 0.9). */
  readonly semantic?: Record<string, unknown>
  readonly cache?: Record<string, unknown>
  readonly responseCache?: Record<string, unknown>
}

export async function startSemanticGateway(options: SemanticGatewayOptions): Promise<RunningTollgate> {
  const base = options.store === 'redis' ? (options.redis ?? {}) : {}
  return startTollgate({
    ...base,
    config: (doc) => {
      base.config?.(doc)
      doc.backends = { ...(doc.backends as object), embedder: { type: 'openai', baseUrl: options.embedder.url } }
      for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
        if (model.name === EMBEDDER) model.deployments = [{ backend: 'embedder' }]
      doc.plans = cachedPlans({
        semantic: { embeddingModel: EMBEDDER, threshold: 0.9, ...options.semantic },
        ...options.cache,
      })
      if (options.responseCache !== undefined) doc.responseCache = options.responseCache
    },
  })
}
