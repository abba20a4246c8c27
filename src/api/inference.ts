// The /v2 inference requests: the fields the gateway itself reads (the model, the limits a
// call reserves on, streaming), checked here. Everything else in a body goes to the
// backend untouched, so the objects are loose. Replies are OpenAI's objects; the schemas
// below name their main fields for the reference and let the rest through.
import { z } from 'zod'
import { MODALITIES, MODEL_TYPES } from '../config/schema.ts'
import { filePart } from './common.ts'

const model = z.string().max(256).meta({ description: 'A model the key may use (GET /v2/models).' })
const maxTokens = z.int().min(0).nullish()
const generation = {
  model,
  stream: z.boolean().nullish().meta({ description: 'Server-sent events instead of one JSON reply.' }),
  stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
}

export const ChatCompletionRequest = z
  .object({
    ...generation,
    messages: z.array(z.object({ role: z.string(), content: z.unknown().optional() }).loose()).min(1),
    max_tokens: maxTokens,
    max_completion_tokens: maxTokens.meta({
      description:
        "Caps the reply; the call reserves this many output tokens. Unset: by the key's tier, defaultMaxTokens, which the gateway sends upstream as max_tokens, or the model's max_output_length.",
    }),
    n: z.int().min(1).nullish(),
  })
  .loose()

export const CompletionRequest = z
  .object({
    ...generation,
    prompt: z.union([z.string(), z.array(z.unknown())]),
    max_tokens: maxTokens,
    n: z.int().min(1).nullish(),
    best_of: z.int().min(1).nullish(),
  })
  .loose()

export const ResponseRequest = z
  .object({
    ...generation,
    input: z.union([z.string(), z.array(z.unknown())]),
    instructions: z.string().nullish(),
    max_output_tokens: maxTokens,
  })
  .loose()

export const EmbeddingRequest = z
  .object({
    model,
    input: z
      .union([z.string(), z.array(z.unknown())])
      .meta({ description: 'A string, strings, token ids, or arrays of token ids.' }),
    dimensions: z.int().min(1).optional(),
    encoding_format: z.enum(['float', 'base64']).optional(),
  })
  .loose()

export const ImageGenerationRequest = z
  .object({
    model,
    prompt: z.string(),
    n: z.int().min(1).nullish(),
    size: z.string().nullish(),
    response_format: z.enum(['url', 'b64_json']).nullish(),
  })
  .loose()

export const FineTuningJobRequest = z
  .object({
    model,
    training_file: z.string().min(1).max(256).meta({ description: 'A file of yours with purpose `fine-tune`.' }),
    validation_file: z.string().min(1).max(256).nullish(),
    suffix: z.string().nullish(),
  })
  .loose()

export const AudioForm = z
  .object({
    file: filePart.meta({ description: 'The audio.' }),
    model,
    prompt: z.string().optional(),
    response_format: z.string().optional(),
    stream: z
      .enum(['true', 'false'])
      .optional()
      .meta({ description: '"true" streams a transcription as server-sent events.' }),
  })
  .loose()

export const ImageEditForm = z
  .object({
    model,
    prompt: z.string(),
    image: filePart.optional().meta({ description: 'The image to edit (or several, as `image[]`).' }),
    'image[]': filePart.optional(),
    mask: filePart.optional(),
  })
  .loose()
  .superRefine((form, ctx) => {
    if (form.image === undefined && form['image[]'] === undefined)
      ctx.addIssue({ code: 'custom', message: 'expected a file part', path: ['image'] })
  })

const usage = z.object({ prompt_tokens: z.int(), completion_tokens: z.int().optional(), total_tokens: z.int() }).loose()

export const ChatCompletion = z
  .object({
    id: z.string(),
    object: z.literal('chat.completion'),
    created: z.int(),
    model: z.string(),
    choices: z.array(
      z
        .object({
          index: z.int(),
          message: z.object({ role: z.string(), content: z.string().nullable() }).loose(),
          finish_reason: z.string().nullable(),
        })
        .loose(),
    ),
    usage,
  })
  .loose()
  .meta({ description: 'A chat completion; with `stream: true`, `chat.completion.chunk` events instead.' })

export const Completion = z
  .object({
    id: z.string(),
    object: z.literal('text_completion'),
    created: z.int(),
    model: z.string(),
    choices: z.array(z.object({ index: z.int(), text: z.string(), finish_reason: z.string().nullable() }).loose()),
    usage,
  })
  .loose()

export const ResponseObject = z
  .object({
    id: z.string(),
    object: z.literal('response'),
    model: z.string(),
    output: z.array(z.unknown()),
    usage: z.object({ input_tokens: z.int(), output_tokens: z.int(), total_tokens: z.int() }).loose(),
  })
  .loose()

export const EmbeddingList = z.object({
  object: z.literal('list'),
  data: z.array(
    z.object({ object: z.literal('embedding'), index: z.int(), embedding: z.union([z.array(z.number()), z.string()]) }),
  ),
  model: z.string(),
  usage,
})

export const ImagesResponse = z
  .object({
    created: z.int(),
    data: z.array(z.object({ b64_json: z.string().optional(), url: z.string().optional() }).loose()),
  })
  .loose()

export const Transcription = z.object({ text: z.string() }).loose()

/** The provider's extra field on a model (not in OpenAI's Model); filled by src/inference/model-meta.ts. */
export const ModelMetaData = z
  .object({
    model_type: z.enum(MODEL_TYPES).meta({
      description:
        'LLM (chat), EMBEDDING, STT (audio: speech to text) or IMAGE_GENERATION. Filter on it, e.g. the audio models are those with STT.',
    }),
    source_type: z
      .enum(['OPEN SOURCE', 'PROPRIETARY'])
      .nullable()
      .meta({ description: 'Open weights or a proprietary model; null when unknown.' }),
    max_sequence_length: z.int().min(0).meta({ description: 'Input + output tokens the model takes; 0 when unknown.' }),
    hidden_size: z.int().min(0).meta({
      description:
        'Embedding models: the dimension of their vectors (what an embeddings call returns without `dimensions`); 0 for the others.',
    }),
    max_output_length: z.int().min(0).meta({
      description: 'Most tokens one reply may have; 0 when unknown or not capped apart from max_sequence_length.',
    }),
    deployment_region: z
      .string()
      .nullable()
      .meta({ description: 'Where the model runs, as the provider names it (e.g. otc-germany).' }),
    location: z
      .string()
      .nullable()
      .meta({ description: "The deployment's location; the region unless configured otherwise." }),
    license: z.string().nullable().meta({ description: 'URL of the licence or terms of use.' }),
    display_name: z.string().meta({ description: "A human name (the provider's displayModelName)." }),
    deployment_country: z.string().nullable().meta({ description: 'The country of the region, e.g. "Germany, EU".' }),
    input_modalities: z
      .array(z.enum(MODALITIES))
      .meta({ description: 'What the model reads: a vision model has image.' }),
    output_modalities: z.array(z.enum(MODALITIES)).meta({ description: 'What the model writes.' }),
    model_lifecycle_stage: z.enum(['Preview', 'Stable', 'Deprecated']),
    is_externally_hosted: z.boolean().meta({
      description: "Served by a third party (Azure OpenAI, Google Cloud...) rather than the provider's own cloud.",
    }),
  })
  .meta({
    description:
      "Facts about the model (the provider's meta_data; not part of OpenAI's Model object). Every field is present.",
  })

export const Model = z
  .object({
    id: z.string(),
    object: z.literal('model'),
    created: z.int(),
    owned_by: z.string(),
    meta_data: ModelMetaData,
  })
  .loose()

export const ModelList = z.object({ object: z.literal('list'), data: z.array(Model) })

export const FineTuningJob = z
  .object({
    id: z.string(),
    object: z.literal('fine_tuning.job'),
    model: z.string(),
    status: z.string(),
    training_file: z.string(),
    created_at: z.int(),
  })
  .loose()

export const FineTuningJobList = z
  .object({ object: z.literal('list'), data: z.array(FineTuningJob), has_more: z.boolean() })
  .loose()
export const FineTuningEventList = z
  .object({
    object: z.literal('list'),
    data: z.array(z.object({ id: z.string(), message: z.string() }).loose()),
    has_more: z.boolean(),
  })
  .loose()
