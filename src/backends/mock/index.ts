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
import type { Endpoint, MockBackendConfig } from '../../config/schema.ts'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../port.ts'
import { transcriptions, translations } from './audio.ts'
import { chatCompletions } from './chat.ts'
import { completions } from './completions.ts'
import type { MockContext } from './context.ts'
import { embeddings } from './embeddings.ts'
import { MockError, errorResponse, unknownUrl } from './errors.ts'
import { createFileStore } from './files.ts'
import { createFineTuning } from './fine-tuning.ts'
import { imageEdits, imageGenerations } from './images.ts'
import { eventStreamResponse } from './reply.ts'
import { responses } from './responses.ts'
import { pacedStream } from './sse.ts'
import { createVectorStores } from './vector-stores.ts'

export interface MockBackendOptions {
  /** The clock, in epoch milliseconds. Tests pass their own to step fine-tuning jobs. */
  readonly now?: () => number
  /** Where uploaded files are kept (under mock-files/<name>); a temporary directory without it. */
  readonly dataDir?: string
  /** Embedding models' own dimensions (meta.hidden_size), by the name this backend knows them by. */
  readonly embeddingDimensions?: ReadonlyMap<string, number>
}

/** The gateway answers these itself, from its configuration. */
type GatewayAnswered = 'models.list' | 'models.get' | 'audio.models'
type Handler = (request: UpstreamRequest) => UpstreamResponse | Promise<UpstreamResponse>

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
    now: options.now ?? Date.now,
    stream(frames, signal) {
      const body = pacedStream(frames, config.tokensPerSecond, signal)
      openStreams.add(body)
      body.once('close', () => openStreams.delete(body))
      return eventStreamResponse(body)
    },
  }
  const files = createFileStore(ctx)
  const fineTuning = createFineTuning(ctx, files)
  const vectorStores = createVectorStores(ctx, files)

  const handlers: Readonly<Record<Exclude<Endpoint, GatewayAnswered>, Handler>> = {
    'chat.completions': (r) => chatCompletions(r, ctx),
    completions: (r) => completions(r, ctx),
    responses: (r) => responses(r, ctx),
    embeddings: (r) => embeddings(r, options.embeddingDimensions),
    'images.generations': (r) => imageGenerations(r, ctx),
    'images.edits': (r) => imageEdits(r, ctx),
    'audio.transcriptions': (r) => transcriptions(r, ctx),
    'audio.translations': (r) => translations(r, ctx),
    // Files, jobs and vector stores route on method and path: retrieving one object arrives
    // under the family's list endpoint, so the endpoint name alone does not say what is asked.
    'files.create': files.handle,
    'files.list': files.handle,
    'files.content': files.handle,
    'files.validate': files.handle,
    'files.delete': files.handle,
    'fine_tuning.jobs.create': fineTuning.handle,
    'fine_tuning.jobs.list': fineTuning.handle,
    'fine_tuning.jobs.cancel': fineTuning.handle,
    'fine_tuning.jobs.events': fineTuning.handle,
    'vector_stores.create': vectorStores.handle,
    'vector_stores.list': vectorStores.handle,
    'vector_stores.update': vectorStores.handle,
    'vector_stores.delete': vectorStores.handle,
    'vector_stores.search': vectorStores.handle,
    'vector_stores.files.create': vectorStores.handle,
    'vector_stores.files.list': vectorStores.handle,
    'vector_stores.files.update': vectorStores.handle,
    'vector_stores.files.delete': vectorStores.handle,
    'vector_stores.file_batches.create': vectorStores.handle,
    'vector_stores.file_batches.list': vectorStores.handle,
    'vector_stores.file_batches.cancel': vectorStores.handle,
  }
  const handlerFor = (endpoint: Endpoint): Handler | undefined =>
    Object.hasOwn(handlers, endpoint) ? handlers[endpoint as keyof typeof handlers] : undefined

  return {
    name,
    type: 'mock',
    supports: (endpoint) => handlerFor(endpoint) !== undefined,
    // No ready(): replies are cut to exact token budgets by the tokenizer on this thread,
    // which the handlers load on their first call (tokenizer/tokens.ts loadEncoder), not the
    // boot, where its ranks would hold about 80 MB of a gateway that may never call the
    // mock. That first call waits for it once (a few hundred milliseconds).
    async send(request) {
      try {
        const handler = handlerFor(request.endpoint)
        if (handler === undefined) throw unknownUrl()
        return await handler(request)
      } catch (err) {
        if (err instanceof MockError) return errorResponse(err)
        throw err
      }
    },
    async close() {
      vectorStores.close()
      for (const stream of openStreams) stream.destroy()
      await rm(filesDir, { recursive: true, force: true })
    },
  }
}
