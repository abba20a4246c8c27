// Files: one store behind /v2/files and /v1/files (OpenAI's File object and upload form).
import { z } from 'zod'
import { deletedObject, filePart, listOf } from './common.ts'

/** The purposes an upload may name (CreateFileRequest). */
export const FILE_PURPOSES = ['assistants', 'batch', 'fine-tune', 'vision', 'user_data', 'evals'] as const

export const CreateFileForm = z.object({
  file: filePart.meta({ description: 'The file\'s bytes.' }),
  purpose: z.enum(FILE_PURPOSES).meta({ description: 'What the file is for (the SDK uploads files for vector stores as `assistants`).' }),
}).loose()

export const FileObject = z.object({
  id: z.string(),
  object: z.literal('file'),
  bytes: z.number().int(),
  created_at: z.number().int(),
  expires_at: z.number().int().nullable(),
  filename: z.string(),
  purpose: z.string(),
  status: z.enum(['uploaded', 'processed', 'error']),
  status_details: z.string().nullable(),
}).meta({ description: 'An uploaded file. Only its owner sees it.' })

export const FileList = listOf(FileObject)
export const FileDeleted = deletedObject('file')

export const FileListQuery = z.object({
  purpose: z.string().max(64).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).optional(),
  order: z.enum(['asc', 'desc']).optional(),
  after: z.string().max(256).optional(),
})
