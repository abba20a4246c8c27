// The provider's `meta_data` on a model object (GET /models, /models/{id}): its docs filter
// models on it (model_type == "STT" for audio, hidden_size for embedding dimensions). Each
// field comes from the plans' catalogue block where the provider's export has it (display
// name, region, and in the next export context window and licence), else from the model's
// `meta` in the configuration, else from its kind. Every field is always present, as the
// provider sends them: an unknown number is 0 and an unknown text null.
import type { z } from 'zod'
import type { ModelMetaData as ModelMetaDataSchema } from '../api/inference.ts'
import type { CatalogueFacts, ModelConfig, ModelKind } from '../config/schema.ts'

/** The reply's shape is the documented one (/openapi.json). */
export type ModelMetaData = z.infer<typeof ModelMetaDataSchema>

const BY_KIND: Readonly<
  Record<ModelKind, Pick<ModelMetaData, 'model_type' | 'input_modalities' | 'output_modalities'>>
> = {
  chat: { model_type: 'LLM', input_modalities: ['text'], output_modalities: ['text'] },
  embedding: { model_type: 'EMBEDDING', input_modalities: ['text'], output_modalities: ['embedding'] },
  audio: { model_type: 'STT', input_modalities: ['audio'], output_modalities: ['text'] },
  image: { model_type: 'IMAGE_GENERATION', input_modalities: ['text'], output_modalities: ['image'] },
}

/** The regions the provider's exports name (in their varying spellings), and where they are. */
const COUNTRY_OF_REGION: Readonly<Record<string, string>> = {
  'otc-germany': 'Germany, EU',
  'azure-sweden-central': 'Sweden, EU',
  'azure-sweden': 'Sweden, EU',
  'azure-france-central': 'France, EU',
  'azure-france': 'France, EU',
  'gcp-europe-west1': 'Belgium, EU',
  'gcp-europe-west4': 'Netherlands, EU',
  'gcp-europe': 'EU',
}

export function modelMetaData(model: ModelConfig, facts: CatalogueFacts | undefined): ModelMetaData {
  const meta = model.meta ?? {}
  const kind = BY_KIND[model.kind]
  const region = facts?.deployment_region ?? meta.deployment_region ?? null
  return {
    model_type: meta.model_type ?? kind.model_type,
    source_type: meta.source_type ?? null,
    max_sequence_length: facts?.max_sequence_length ?? meta.max_sequence_length ?? model.contextTokens ?? 0,
    hidden_size: meta.hidden_size ?? 0,
    max_output_length: meta.max_output_length ?? 0,
    deployment_region: region,
    location: meta.location ?? region,
    license: facts?.license ?? meta.license ?? null,
    display_name: facts?.display_name ?? meta.display_name ?? model.name,
    deployment_country:
      meta.deployment_country ?? (region === null ? null : (COUNTRY_OF_REGION[region.toLowerCase()] ?? null)),
    input_modalities: meta.input_modalities ?? kind.input_modalities,
    output_modalities: meta.output_modalities ?? kind.output_modalities,
    model_lifecycle_stage: meta.model_lifecycle_stage ?? 'Stable',
    is_externally_hosted: meta.is_externally_hosted ?? false,
  }
}
