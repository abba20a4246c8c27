// Files: one store behind /v2/files and /v1/files (OpenAI's File object and upload form).
import { z } from 'zod'
import { deletedObject, filePart, listOf } from './common.ts'

/** The purposes an upload may name (CreateFileRequest). */
export const FILE_PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals', 'visual-rag'] as const

export const CreateFileForm = z
  .object({
    file: filePart.meta({ description: "The file's bytes." }),
    purpose: z.enum(FILE_PURPOSES).meta({
      description:
        "What the file is for (the SDK uploads files for vector stores as `assistants`; the provider's Visual RAG guide uploads as `visual-rag`).",
    }),
  })
  .loose()

export const FileObject = z
  .object({
    id: z.string(),
    object: z.literal('file'),
    bytes: z.number().int(),
    created_at: z.number().int(),
    expires_at: z.number().int().nullable(),
    filename: z.string(),
    purpose: z.string(),
    status: z.enum(['uploaded', 'processed', 'error']),
    status_details: z.string().nullable(),
  })
  .meta({ description: 'An uploaded file. Only its owner sees it.' })

export const FileList = listOf(FileObject)
export const FileDeleted = deletedObject('file')

export const FileListQuery = z.object({
  purpose: z.string().max(64).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).optional(),
  order: z.enum(['asc', 'desc']).optional(),
  after: z.string().max(256).optional(),
})

const ValidationProblemSchema = z.object({
  line: z.int().min(0).meta({ description: 'The line (from 1; 0 for the file as a whole).' }),
  code: z.string().meta({
    description:
      'invalid_json, not_an_object, missing_messages, invalid_message, unrecognized_key, unrecognized_role, missing_content, invalid_weight, missing_assistant_message, line_too_long, not_utf8, empty_file',
  }),
  message: z.string(),
})
export type ValidationProblem = z.output<typeof ValidationProblemSchema>

/** GET /v2/files/validate/{id}: the dataset check the provider's fine-tuning guide calls. */
export const FileValidation = z
  .object({
    id: z.string(),
    object: z.literal('file.validation'),
    filename: z.string(),
    purpose: z.string(),
    valid: z.boolean().meta({ description: "Every line is a chat example in OpenAI's fine-tuning format." }),
    examples: z.int().min(0).meta({ description: 'Lines that hold an example (blank lines aside).' }),
    error_count: z.int().min(0),
    errors: z.array(ValidationProblemSchema).meta({ description: 'The first 20 problems, in line order.' }),
    message: z.string().meta({ description: 'The verdict in a sentence.' }),
  })
  .meta({
    description:
      'Whether a file is a JSONL fine-tuning dataset: one `{"messages": [...]}` chat example per line, each with an assistant message; `weight` 0 or 1 on assistant messages only.',
  })
export type FileValidationObject = z.output<typeof FileValidation>
