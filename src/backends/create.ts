// Builds the adapter for one configured backend.
import type { BackendConfig, Secrets } from '../config/schema.ts'
import { createMockBackend } from './mock/index.ts'
import { createOpenAIBackend } from './openai.ts'
import type { BackendAdapter } from './port.ts'

export function createAdapter(name: string, config: BackendConfig, secrets: Secrets, dataDir?: string): BackendAdapter {
  switch (config.type) {
    case 'mock':
      return createMockBackend(name, config, dataDir === undefined ? {} : { dataDir })
    case 'openai':
      return createOpenAIBackend(name, config, config.apiKeyEnv ? secrets.backendKeys[config.apiKeyEnv] : undefined)
  }
}
