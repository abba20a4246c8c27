// The mock backend's handlers, one per endpoint it answers, and the state they keep
// (uploaded files, fine-tuning jobs, vector stores). index.ts loads this module on the
// mock's first call: it and what it imports are most of the mock's code.
import type { Endpoint } from '../../config/schema.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import { transcriptions, translations } from './audio.ts'
import { chatCompletions } from './chat.ts'
import { completions } from './completions.ts'
import type { GatewayAnswered, MockContext } from './context.ts'
import { embeddings } from './embeddings.ts'
import { createFileStore } from './files.ts'
import { createFineTuning } from './fine-tuning.ts'
import { imageEdits, imageGenerations } from './images.ts'
import { responses } from './responses.ts'
import { createVectorStores } from './vector-stores.ts'

type Handler = (request: UpstreamRequest) => UpstreamResponse | Promise<UpstreamResponse>

export interface MockHandlers {
  /** The handler of an endpoint the mock answers. */
  of(endpoint: Endpoint): Handler | undefined
  /** Stops the vector stores' work in progress. */
  close(): void
}

export function createMockHandlers(
  ctx: MockContext,
  embeddingDimensions: ReadonlyMap<string, number> | undefined,
): MockHandlers {
  const files = createFileStore(ctx)
  const fineTuning = createFineTuning(ctx, files)
  const vectorStores = createVectorStores(ctx, files)

  const handlers: Readonly<Record<Exclude<Endpoint, GatewayAnswered>, Handler>> = {
    'chat.completions': (r) => chatCompletions(r, ctx),
    completions: (r) => completions(r, ctx),
    responses: (r) => responses(r, ctx),
    embeddings: (r) => embeddings(r, embeddingDimensions),
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

  return {
    of: (endpoint) => (Object.hasOwn(handlers, endpoint) ? handlers[endpoint as keyof typeof handlers] : undefined),
    close: () => vectorStores.close(),
  }
}
