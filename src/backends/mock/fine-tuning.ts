// /fine_tuning/jobs: create, list, retrieve, cancel, and list events. Jobs refer to files
// uploaded to this same backend; their progress is read off a timeline (fine-tuning-job.ts).
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, unknownUrl } from './errors.ts'
import type { FileStore } from './files.ts'
import {
  eventsAt,
  isFinished,
  jobObject,
  statusAt,
  type HyperparameterValue,
  type Hyperparameters,
  type JobRecord,
} from './fine-tuning-job.ts'
import { seedOf } from './hash.ts'
import { newId } from './ids.ts'
import { paginate } from './page.ts'
import {
  jsonBody,
  optionalEnum,
  optionalInteger,
  optionalObject,
  optionalString,
  objectById,
  queryOf,
  quotableId,
  requiredString,
  segmentsOf,
} from './params.ts'
import { jsonResponse } from './reply.ts'

const LIST_LIMITS = { default: 20, max: 100 }
/** OpenAI's "auto" settles on 3 epochs for small files; the mock always does. */
const AUTO_EPOCHS = 3
/** Trained tokens are estimated from the training file at about 4 bytes a token. */
const BYTES_PER_TOKEN = 4

export interface FineTuning {
  handle(request: UpstreamRequest): UpstreamResponse
}

export function createFineTuning(ctx: MockContext, files: FileStore): FineTuning {
  const jobs = new Map<string, JobRecord>()
  const stepMs = ctx.config.fineTuneStepMs

  const view = (job: JobRecord): UpstreamResponse => jsonResponse(200, jobObject(job, stepMs, ctx.now()))

  const existing = (id: string): JobRecord => objectById(jobs, id, 'fine-tuning job', 'fine_tuning_job_id')

  const uploadedFile = (id: string, param: string): { readonly bytes: number } => {
    const file = files.get(id)
    if (file === undefined)
      throw invalidRequest(`Invalid ${param}: no file with id ${quotableId(id)}.`, param, 'invalid_file')
    if (file.purpose !== 'fine-tune')
      throw invalidRequest(`Invalid ${param}: the file's purpose must be 'fine-tune'.`, param, 'invalid_file_purpose')
    return file
  }

  const create = (request: UpstreamRequest): UpstreamResponse => {
    const body = jsonBody(request)
    const model = requiredString(body, 'model')
    const trainingFile = requiredString(body, 'training_file')
    const training = uploadedFile(trainingFile, 'training_file')
    const validationFile = optionalString(body, 'validation_file') ?? null
    if (validationFile !== null) uploadedFile(validationFile, 'validation_file')
    const suffix = optionalString(body, 'suffix') ?? null
    if (suffix !== null && (suffix.length === 0 || suffix.length > 64)) {
      throw invalidRequest("Invalid 'suffix': expected 1 to 64 characters.", 'suffix')
    }
    const hyperparameters = readHyperparameters(body)
    const id = newId('ftjob-')
    const epochs = typeof hyperparameters.n_epochs === 'number' ? hyperparameters.n_epochs : AUTO_EPOCHS
    const job: JobRecord = {
      id,
      createdAtMs: ctx.now(),
      model,
      trainingFile,
      validationFile,
      suffix,
      seed: optionalInteger(body, 'seed', { min: 0, max: 2_147_483_647 }) ?? seedOf(id) % 2_147_483_648,
      hyperparameters,
      metadata: optionalObject(body, 'metadata') ?? null,
      fineTunedModel: `ft:${model}:tollgate-mock:${suffix ?? ''}:${id.slice(-8)}`,
      trainedTokens: Math.ceil(training.bytes / BYTES_PER_TOKEN) * epochs,
      cancelledAtMs: undefined,
    }
    jobs.set(id, job)
    return view(job)
  }

  const cancel = (job: JobRecord): UpstreamResponse => {
    const now = ctx.now()
    // Cancelling a finished job changes nothing; the caller sees how it ended.
    if (!isFinished(statusAt(job, stepMs, now))) job.cancelledAtMs = now
    return view(job)
  }

  return {
    handle(request) {
      const { pathname, query } = queryOf(request.path)
      const segments = segmentsOf(pathname)
      if (segments === undefined || segments[0] !== 'fine_tuning' || segments[1] !== 'jobs' || segments.length > 4)
        throw unknownUrl()
      const [, , id = '', action] = segments
      const route = `${request.method} ${id === '' ? '' : ':id'}${action === undefined ? '' : `/${action}`}`
      switch (route) {
        case 'POST ':
          return create(request)
        case 'GET ': {
          // Newest first, as OpenAI lists jobs.
          const page = paginate([...jobs.values()].reverse(), query, LIST_LIMITS)
          const now = ctx.now()
          return jsonResponse(200, { ...page, data: page.data.map((job) => jobObject(job, stepMs, now)) })
        }
        case 'GET :id':
          return view(existing(id))
        case 'POST :id/cancel':
          return cancel(existing(id))
        case 'GET :id/events':
          return jsonResponse(200, paginate(eventsAt(existing(id), stepMs, ctx.now()), query, LIST_LIMITS))
        default:
          throw unknownUrl()
      }
    },
  }
}

/** From `method.supervised.hyperparameters`, or the deprecated top-level `hyperparameters`. */
function readHyperparameters(body: Readonly<Record<string, unknown>>): Hyperparameters {
  const method = optionalObject(body, 'method')
  let source = optionalObject(body, 'hyperparameters')
  if (method !== undefined) {
    const type = optionalEnum(method, 'type', ['supervised', 'dpo', 'reinforcement'] as const)
    if (type !== undefined && type !== 'supervised') {
      throw invalidRequest('The mock backend runs supervised fine-tuning only.', 'method.type', 'unsupported_value')
    }
    const supervised = optionalObject(method, 'supervised')
    source = (supervised && optionalObject(supervised, 'hyperparameters')) ?? source
  }
  const value = (name: keyof Hyperparameters, integer: boolean): HyperparameterValue => {
    const raw = source?.[name]
    if (raw === undefined || raw === null || raw === 'auto') return 'auto'
    if (typeof raw === 'number' && raw > 0 && (!integer || Number.isInteger(raw))) return raw
    throw invalidRequest(`Invalid '${name}': expected 'auto' or a positive ${integer ? 'integer' : 'number'}.`, name)
  }
  return {
    batch_size: value('batch_size', true),
    learning_rate_multiplier: value('learning_rate_multiplier', false),
    n_epochs: value('n_epochs', true),
  }
}
