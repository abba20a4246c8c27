// A fine-tuning job's life, computed from timestamps rather than driven by timers: a job
// is queued when created, running one step later, succeeded two steps later, unless it
// was cancelled first. Status, events and the job object are all read off that timeline
// at the moment asked, so no background work runs and nothing needs stopping.
import { digest } from './hash.ts'
import { unixSeconds } from './ids.ts'

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'cancelled'

export type HyperparameterValue = 'auto' | number

export interface Hyperparameters {
  readonly batch_size: HyperparameterValue
  readonly learning_rate_multiplier: HyperparameterValue
  readonly n_epochs: HyperparameterValue
}

export interface JobRecord {
  readonly id: string
  readonly createdAtMs: number
  readonly model: string
  readonly trainingFile: string
  readonly validationFile: string | null
  readonly suffix: string | null
  readonly seed: number
  readonly hyperparameters: Hyperparameters
  readonly metadata: Readonly<Record<string, unknown>> | null
  readonly fineTunedModel: string
  readonly trainedTokens: number
  /** Set once, by a cancel that came before the job finished. */
  cancelledAtMs: number | undefined
}

interface Transition {
  readonly status: JobStatus
  readonly atMs: number
  readonly messages: readonly string[]
}

function timeline(job: JobRecord, stepMs: number): Transition[] {
  const planned: Transition[] = [
    {
      status: 'queued',
      atMs: job.createdAtMs,
      messages: [`Created fine-tuning job: ${job.id}`, `Validating training file: ${job.trainingFile}`],
    },
    { status: 'running', atMs: job.createdAtMs + stepMs, messages: ['Fine-tuning job started'] },
    {
      status: 'succeeded',
      atMs: job.createdAtMs + 2 * stepMs,
      messages: [`New fine-tuned model created: ${job.fineTunedModel}`, 'The job has successfully completed'],
    },
  ]
  const cancelledAt = job.cancelledAtMs
  if (cancelledAt === undefined) return planned
  // "<=": a step due at the very moment of the cancel had already been seen to happen.
  return [
    ...planned.filter((t) => t.atMs <= cancelledAt),
    { status: 'cancelled', atMs: cancelledAt, messages: ['The job was cancelled'] },
  ]
}

/** What has happened by `nowMs`, oldest first. */
function history(job: JobRecord, stepMs: number, nowMs: number): Transition[] {
  return timeline(job, stepMs).filter((t) => t.atMs <= nowMs)
}

export function statusAt(job: JobRecord, stepMs: number, nowMs: number): JobStatus {
  return history(job, stepMs, nowMs).at(-1)?.status ?? 'queued'
}

export function isFinished(status: JobStatus): boolean {
  return status === 'succeeded' || status === 'cancelled'
}

/** The fine_tuning.job object as of `nowMs`. */
export function jobObject(job: JobRecord, stepMs: number, nowMs: number): Record<string, unknown> {
  const status = statusAt(job, stepMs, nowMs)
  const finishAtMs = job.createdAtMs + 2 * stepMs
  const succeeded = status === 'succeeded'
  return {
    id: job.id,
    object: 'fine_tuning.job',
    created_at: unixSeconds(job.createdAtMs),
    error: null,
    estimated_finish: isFinished(status) ? null : unixSeconds(finishAtMs),
    fine_tuned_model: succeeded ? job.fineTunedModel : null,
    finished_at: succeeded ? unixSeconds(finishAtMs) : null,
    hyperparameters: job.hyperparameters,
    integrations: null,
    metadata: job.metadata,
    method: { type: 'supervised', supervised: { hyperparameters: job.hyperparameters } },
    model: job.model,
    organization_id: 'org-tollgate-mock',
    result_files: [],
    seed: job.seed,
    status,
    trained_tokens: succeeded ? job.trainedTokens : null,
    training_file: job.trainingFile,
    user_provided_suffix: job.suffix,
    validation_file: job.validationFile,
  }
}

export interface JobEvent {
  readonly id: string
  readonly object: 'fine_tuning.job.event'
  readonly created_at: number
  readonly level: 'info'
  readonly message: string
  readonly type: 'message'
  readonly data: Readonly<Record<string, never>>
}

/** The events as of `nowMs`, newest first. Ids depend only on the job and position, so they are stable cursors. */
export function eventsAt(job: JobRecord, stepMs: number, nowMs: number): JobEvent[] {
  const events: JobEvent[] = []
  for (const transition of history(job, stepMs, nowMs)) {
    for (const message of transition.messages) {
      events.push({
        id: `ftevent-${digest(`${job.id}\u0000${events.length}`).subarray(0, 12).toString('hex')}`,
        object: 'fine_tuning.job.event',
        created_at: unixSeconds(transition.atMs),
        level: 'info',
        message,
        type: 'message',
        data: {},
      })
    }
  }
  return events.reverse()
}
