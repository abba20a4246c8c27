// The built-in mock inference backend: answers every proxied endpoint in OpenAI's wire
// format with deterministic content, so the gateway serves real SDK calls with nothing
// else running. This file only dispatches; each endpoint family has its own room.
// State (uploaded files, fine-tuning jobs, vector stores, open streams) lives in the
// adapter returned.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Readable } from 'node:stream'
import type { MockBackendConfig } from '../../config/schema.ts'
import type { BackendAdapter } from '../port.ts'
import { MOCK_ENDPOINTS, type MockContext } from './context.ts'
import { MockError, errorResponse, unknownUrl } from './errors.ts'
import type { MockHandlers } from './handlers.ts'
import { eventStreamResponse } from './reply.ts'
import { pacedStream } from './sse.ts'
import { MockPromptCache } from './prompt-cache.ts'

export interface MockBackendOptions {
  /** The clock, in epoch milliseconds. Tests pass their own to step fine-tuning jobs. */
  readonly now?: () => number
  /** Where uploaded files are kept (under mock-files/<name>); a temporary directory without it. */
  readonly dataDir?: string
  /** Embedding models' own dimensions (meta.hidden_size), by the name this backend knows them by. */
  readonly embeddingDimensions?: ReadonlyMap<string, number>
}

export function createMockBackend(
  name: string,
  config: MockBackendConfig,
  options: MockBackendOptions = {},
): BackendAdapter {
  const openStreams = new Set<Readable>()
  // The mock keeps no file metadata across restarts, so their bytes go too.
  const filesDir =
    options.dataDir === undefined
      ? mkdtempSync(join(tmpdir(), 'tollgate-mock-files-'))
      : join(options.dataDir, 'mock-files', name)
  rmSync(filesDir, { recursive: true, force: true })
  mkdirSync(filesDir, { recursive: true, mode: 0o700 })
  const ctx: MockContext = {
    config,
    filesDir,
    promptCache: new MockPromptCache(),
    now: options.now ?? Date.now,
    stream(frames, signal) {
      const body = pacedStream(frames, config.tokensPerSecond, signal)
      openStreams.add(body)
      body.once('close', () => openStreams.delete(body))
      return eventStreamResponse(body)
    },
  }
  // The handlers (and their modules: chat, files, fine-tuning, vector stores...) are
  // loaded by the first call, so a gateway that never calls the mock does not hold them.
  let loaded: Promise<MockHandlers> | undefined
  const handlers = (): Promise<MockHandlers> =>
    (loaded ??= import('./handlers.ts').then((m) => m.createMockHandlers(ctx, options.embeddingDimensions)))

  return {
    name,
    type: 'mock',
    supports: (endpoint) => MOCK_ENDPOINTS.has(endpoint),
    // The handlers are loaded before the gateway listens, by a mock that serves a model (the
    // registry readies only those): loading modules during a call would hold every call in
    // flight for as long. Replies are cut to exact token budgets by the tokenizer's worker
    // (tokenizer/counter.ts), started by the first call that counts, in its own thread: the
    // encoder is never loaded on this one.
    async ready() {
      await handlers()
    },
    async send(request) {
      try {
        const handler = MOCK_ENDPOINTS.has(request.endpoint) ? (await handlers()).of(request.endpoint) : undefined
        if (handler === undefined) throw unknownUrl()
        return await handler(request)
      } catch (err) {
        if (err instanceof MockError) return errorResponse(err)
        throw err
      }
    },
    async close() {
      if (loaded !== undefined) (await loaded).close()
      for (const stream of openStreams) stream.destroy()
      await rm(filesDir, { recursive: true, force: true })
    },
  }
}
