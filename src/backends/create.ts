// Builds the adapter for one configured backend.
import type { BackendConfig, ModelConfig, Secrets } from '../config/schema.ts'
import { createAnthropicBackend } from './anthropic/index.ts'
import { createBedrockBackend } from './bedrock/index.ts'
import { createMockBackend } from './mock/index.ts'
import { createGeminiBackend } from './gemini.ts'
import { createOpenAIBackend } from './openai.ts'
import type { BackendAdapter } from './port.ts'

/** `models`: the configured models, for what a mock needs to know of those it serves. */
export function createAdapter(
  name: string,
  config: BackendConfig,
  secrets: Secrets,
  dataDir?: string,
  models: readonly ModelConfig[] = [],
): BackendAdapter {
  switch (config.type) {
    case 'mock':
      return createMockBackend(name, config, {
        ...(dataDir === undefined ? {} : { dataDir }),
        embeddingDimensions: embeddingDimensions(name, models),
      })
    case 'openai':
      return createOpenAIBackend(name, config, config.apiKeyEnv ? secrets.backendKeys[config.apiKeyEnv] : undefined)
    case 'anthropic':
      return createAnthropicBackend(name, config, config.apiKeyEnv ? secrets.backendKeys[config.apiKeyEnv] : undefined)
    case 'gemini': {
      // An API key, or on Vertex AI the service account's key.
      const env = config.vertex?.credentialsEnv ?? config.apiKeyEnv
      return createGeminiBackend(name, config, env ? secrets.backendKeys[env] : undefined)
    }
    case 'bedrock': {
      const accessKeyId = secrets.backendKeys[config.accessKeyIdEnv]
      const secretAccessKey = secrets.backendKeys[config.secretAccessKeyEnv]
      const sessionToken = secrets.backendKeys[config.sessionTokenEnv]
      return createBedrockBackend(
        name,
        config,
        accessKeyId === undefined || secretAccessKey === undefined
          ? undefined
          : { accessKeyId, secretAccessKey, ...(sessionToken === undefined ? {} : { sessionToken }) },
      )
    }
  }
}

/** The dimension of each embedding model deployed on backend `name`, by its upstream name. */
export function embeddingDimensions(name: string, models: readonly ModelConfig[]): Map<string, number> {
  const dimensions = new Map<string, number>()
  for (const model of models) {
    const size = model.meta?.hidden_size
    if (model.kind !== 'embedding' || size === undefined) continue
    for (const d of model.deployments) if (d.backend === name) dimensions.set(d.model ?? model.name, size)
  }
  return dimensions
}
