// What one mock backend shares with its handlers: its configuration, its clock, and the
// way to open a paced stream (which index.ts tracks, so close() can end them all).
import { ENDPOINTS, type Endpoint, type MockBackendConfig } from '../../config/schema.ts'
import type { UpstreamResponse } from '../port.ts'
import type { MockPromptCache } from './prompt-cache.ts'
import type { Frame } from './sse.ts'

export interface MockContext {
  readonly config: MockBackendConfig
  /** Milliseconds since the epoch; injectable so fine-tuning tests need not sleep. */
  now(): number
  /** A text/event-stream response releasing `frames` at config.tokensPerSecond. */
  stream(frames: Iterable<Frame>, signal: AbortSignal): UpstreamResponse
  /** Where uploaded files' bytes are kept (the mock's alone; emptied when it starts). */
  readonly filesDir: string
  /** Prompts cached by prompt_cache_key (prompt-cache.ts). */
  readonly promptCache: MockPromptCache
}

/** The gateway answers these itself, from its configuration. */
export type GatewayAnswered = 'models.list' | 'models.get' | 'audio.models'
const GATEWAY_ANSWERED: ReadonlySet<string> = new Set<GatewayAnswered>(['models.list', 'models.get', 'audio.models'])

/** Every other endpoint: what the mock answers (handlers.ts has one handler for each). */
export const MOCK_ENDPOINTS: ReadonlySet<Endpoint> = new Set(ENDPOINTS.filter((e) => !GATEWAY_ANSWERED.has(e)))
