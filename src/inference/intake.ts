// The corridor's intake, once the key is known and may use the endpoint: read + validate
// the body → resolve the model (and may the key use it) → the key's limits for it →
// ownership of what the call names → the estimate it is admitted on → room for an upload.
// What comes out is a PreparedCall, ready to be admitted (corridor.ts).
import type { IncomingMessage } from 'node:http'
import type { BackendRegistry } from '../backends/registry.ts'
import type { PlansConfig } from '../config/schema.ts'
import { GatewayError, gatewayError } from '../errors.ts'
import { readJsonBody, readMultipartBody, type RequestBody } from '../http/body.ts'
import type { BodyRate } from '../http/body-rate.ts'
import type { UploadHold } from '../files/quota.ts'
import type { ScreenContext } from '../guardrails/create.ts'
import type { Principal } from '../keys/record.ts'
import type { JsonObject } from '../json.ts'
import { estimateUsage, type Estimate } from '../limits/estimate.ts'
import { resolveLimits, storageCapsOf, type ResolvedLimits } from '../limits/plans.ts'
import { withPathModel } from './azure-endpoints.ts'
import type { AdmissionRequest } from '../limits/port.ts'
import type { InferenceDeps, PreparedCall } from './call.ts'
import type { EndpointSpec } from './endpoints.ts'
import { checkOwnership } from './ownership.ts'
import { checkTranslatable } from './responses-over-chat/index.ts'
import { checkModelScope } from './scopes.ts'
import { withClass } from '../priority/classes.ts'
import { maxWaitOf } from '../queue/deadline.ts'
import { modelOf, validateBody } from './validate.ts'
import { ANTHROPIC_CARRIED } from '../protocols/anthropic/carried.ts'

/** The step after the intake (corridor.ts): a prepared call's text under its guardrail policy. */
export { screened } from '../guardrails/create.ts'

export type IntakeDeps = Pick<InferenceDeps, 'config' | 'ownership' | 'fileQuota' | 'spoolDir' | 'guardrails'> & {
  readonly bodyRate: BodyRate
}

export interface BodyLimit {
  /** Largest body accepted, when lower than the server's limits. */
  readonly bodyLimitBytes?: number
  /** Why the body limit is lower, for the 413's message. */
  readonly bodyLimitReason?: string
  /**
   * The body in another API's shape turned into the endpoint's own (a translator at the
   * edge: protocols/anthropic/request-in.ts), before it is validated: everything after it
   * sees only the endpoint's request. Throws a GatewayError to refuse it. `registry` is the
   * call's: what the translation may carry can depend on the backends of the model.
   */
  readonly inbound?: (body: JsonObject, registry: BackendRegistry) => JsonObject
}

/** How the intake reads a call: its body's limits, and whether it may wait in a line. */
export interface IntakeOptions extends BodyLimit {
  /**
   * The call waits in its key's line (a /queue drop-in twin): x-tollgate-max-wait-ms is its
   * deadline, and a value that is not a whole number of ms is refused (400 invalid_header).
   * Elsewhere (/v2, /v1, a stored request) nothing waits on it: the header is ignored, so a
   * client that sets it on every call is not refused where it has no meaning.
   */
  readonly waitsInLine?: boolean
}

/** What the intake has taken so far: let go of when the call is done, read by a refusal. */
export interface Taken {
  body: RequestBody
  resolved?: ResolvedLimits
  upload?: UploadHold
}

/** The intake's way, for a request whose key may use `spec`; `taken` follows it as it goes. */
export async function prepare(
  deps: IntakeDeps,
  req: IncomingMessage,
  notes: { model?: string } & ScreenContext,
  principal: Principal,
  call: Pick<PreparedCall, 'runtime' | 'spec' | 'params' | 'query'>,
  limit: IntakeOptions,
  taken: Taken,
): Promise<PreparedCall> {
  const { runtime } = call
  const { config, registry } = runtime
  const { spec, params, query } = call
  taken.body = await readBody(deps, req, spec, limit)
  // The gateway's own member for an anthropic backend is set by a translation, never by a caller.
  if (taken.body.kind === 'json' && ANTHROPIC_CARRIED in taken.body.value)
    throw gatewayError('invalid_body', {
      message: `'${ANTHROPIC_CARRIED}' is the gateway's own member and cannot be sent.`,
      param: ANTHROPIC_CARRIED,
    })
  if (limit.inbound !== undefined && taken.body.kind === 'json')
    taken.body = { kind: 'json', value: limit.inbound(taken.body.value, registry) }
  if (spec.modelParam !== undefined) taken.body = withPathModel(taken.body, params[spec.modelParam] ?? '')
  const body = taken.body
  validateBody(spec.endpoint, body, query)
  const modelName = spec.modelKinds ? modelOf(body) : null
  if (modelName !== null) {
    const route = registry.model(modelName)
    const baseModel = spec.endpoint === 'fine_tuning.jobs.create' && config.fineTuning.baseModels.includes(modelName)
    if (!baseModel && (!route || !spec.modelKinds?.includes(route.config.kind))) {
      throw gatewayError('model_not_found', {
        message: `The model '${printable(modelName)}' does not exist or cannot be used with this endpoint. GET /v2/models lists the models this key may use.`,
        param: 'model',
      })
    }
    checkModelScope(principal, modelName)
    notes.model = modelName
    // What a chat-only deployment of the model cannot be asked for is refused before it is admitted.
    checkTranslatable(spec.endpoint, body, route)
  }
  // Its priority class (service_tier) prices it and shares its limits (priority/classes.ts).
  const { resolved, serviceClass } = classedLimits(config.plans, principal, spec, { body, modelName })
  taken.resolved = resolved
  await checkOwnership(deps.ownership, spec, params, query, body, principal.owner)
  const model = modelName === null ? undefined : registry.model(modelName)?.config
  const estimate = estimateUsage(spec.endpoint, body.kind === 'json' ? body.value : null, {
    defaultMaxTokens: config.defaultMaxTokens,
    contextTokens: model?.contextTokens,
    outputCap: config.plans.tiers[resolved.tier]?.outputCap,
    outputCeiling: model?.meta?.max_output_length,
  })
  // An uploaded batch or fine-tuning file is checked line by line before it holds room (guardrails/uploads.ts).
  await deps.guardrails?.screenUpload({ runtime, spec, principal, body, modelName, resolved }, notes)
  const caps = storageCapsOf(config.plans, config.storageCaps, resolved.tier)
  const upload = (taken.upload = await deps.fileQuota?.hold(spec, principal, caps, body))
  return {
    runtime,
    spec,
    params,
    query,
    principal,
    body,
    modelName,
    resolved,
    estimate,
    serviceClass,
    ...(limit.waitsInLine === true ? maxWaitOf(req) : {}),
    ...(upload === undefined ? {} : { upload }),
  }
}

/** The body in the endpoint's form, within the server's limits and any lower one. */
function readBody(
  deps: IntakeDeps,
  req: IncomingMessage,
  spec: EndpointSpec,
  { bodyLimitBytes, bodyLimitReason }: BodyLimit,
): Promise<RequestBody> {
  const { server } = deps.config
  const within = (serverLimit: number): number => Math.min(serverLimit, bodyLimitBytes ?? serverLimit)
  const read = (): Promise<RequestBody> => {
    switch (spec.body) {
      case 'json':
        return readJsonBody(req, within(server.jsonBodyLimitBytes), deps.bodyRate)
      case 'multipart':
        return readMultipartBody(req, within(server.uploadLimitBytes), deps.spoolDir, deps.bodyRate)
      case 'none':
        return Promise.resolve({ kind: 'none' })
    }
  }
  if (bodyLimitReason === undefined) return read()
  return read().catch((err: unknown) => {
    if (err instanceof GatewayError && err.errorName === 'body_too_large') {
      throw gatewayError('body_too_large', { message: `${err.message} ${bodyLimitReason}` })
    }
    throw err
  })
}

/** The limits a call is admitted and charged on (a stored request again, when it runs): its key's, in its class (priority/classes.ts). */
export function classedLimits(
  plans: PlansConfig,
  principal: Principal,
  spec: EndpointSpec,
  parts: Pick<PreparedCall, 'body' | 'modelName'> & { readonly batch?: true },
): Pick<PreparedCall, 'resolved' | 'serviceClass'> {
  const resolved = resolveLimits(plans, principal.key, parts.modelName ?? '*')
  return withClass(plans, principal.key, resolved, spec.endpoint, parts.body, parts.batch === true)
}

/** Client-supplied names are echoed only when plain. */
function printable(value: string): string {
  return /^[\w.:/@-]{1,128}$/.test(value) ? value : '(unprintable)'
}

/** What the limiter is asked to admit for a prepared call. */
export function admissionRequestOf(call: PreparedCall): AdmissionRequest {
  const { principal, resolved, estimate } = call
  return {
    keyId: principal.keyId,
    owner: principal.owner,
    tier: resolved.tier,
    model: resolved.model,
    limits: resolved.limits,
    ...(resolved.batch === true ? { batch: true } : {}),
    estimate,
    ...(call.serviceClass === undefined ? {} : { serviceClass: call.serviceClass }),
    ...(call.maxWaitMs === undefined ? {} : { maxWaitMs: call.maxWaitMs }),
    ...(estimate.outputDefaulted
      ? { reservationNote: defaultReservationNote(estimate), uncapped: { replies: estimate.replies ?? 1 } }
      : {}),
  }
}

/** Why a request without max_tokens reserved so much, and what lowers it. */
function defaultReservationNote(estimate: Estimate): string {
  const reserved = estimate.outputTokens
  const why =
    estimate.sentCap === undefined
      ? "the model's most output per reply, which this key's tier holds for a call without a cap"
      : `the gateway's defaultMaxTokens, or the model's most output when lower: ${estimate.sentCap} per reply, sent upstream as the call's cap`
  return (
    `This request sets no max_tokens, so it reserved ${reserved} output tokens (${why}): ` +
    'set max_tokens (or max_completion_tokens, max_output_tokens) to what you expect and it reserves only that; unused tokens are given back when the call ends.'
  )
}
