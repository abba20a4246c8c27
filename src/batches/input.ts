// A batch's input file, line by line (OpenAI's BatchRequestInput: `custom_id`, `method`,
// `url`, `body`), and each line's body checked as the corridor's intake checks a live
// call's (inference/intake.ts): the body's shape, the model (known, for this endpoint,
// within the key's scopes), and every id it names the caller's. What is wrong is reported
// by line; a line that passes becomes a PreparedCall through corridor.restore.
import type { Endpoint } from '../config/schema.ts'
import { GatewayError, toGatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import type { Corridor, PreparedCall } from '../inference/corridor.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from '../inference/endpoints.ts'
import { checkOwnership } from '../inference/ownership.ts'
import { checkTranslatable } from '../inference/responses-over-chat/index.ts'
import { modelOf, validateBody } from '../inference/validate.ts'
import type { Principal } from '../keys/record.ts'
import { estimateUsage } from '../limits/estimate.ts'
import { resolveLimits } from '../limits/plans.ts'
import type { Runtime } from '../runtime/snapshot.ts'
import type { OwnershipStore } from '../store/ports.ts'
import type { BatchError } from './port.ts'

/** The endpoints a batch may run, under both spellings a client may name them. */
const BATCH_ENDPOINTS: Readonly<Record<string, Endpoint>> = {
  '/chat/completions': 'chat.completions',
  '/completions': 'completions',
  '/embeddings': 'embeddings',
  '/responses': 'responses',
}

export const BATCH_ENDPOINT_PATHS: readonly string[] = Object.keys(BATCH_ENDPOINTS).flatMap((p) => [
  `/v1${p}`,
  `/v2${p}`,
])

/** The endpoint a batch's `endpoint` (or a line's `url`) names, or undefined. */
export function batchEndpointOf(path: string): Endpoint | undefined {
  const match = /^\/v[12](\/[a-z/]+)$/.exec(path)
  return match?.[1] === undefined ? undefined : BATCH_ENDPOINTS[match[1]]
}

export function specOf(endpoint: Endpoint): EndpointSpec {
  const spec = PROXIED_ENDPOINTS.find((s) => s.endpoint === endpoint && s.method === 'POST')
  if (spec === undefined) throw new Error(`no POST spec for ${endpoint}`)
  return spec
}

export interface ParsedLine {
  readonly index: number
  readonly customId: string
  readonly body: Record<string, unknown>
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

const lineError = (line: number, code: string, message: string, param: string | null = null): BatchError => ({
  code,
  message,
  param,
  line,
})

/** Splits and reads the file's lines (blank ones skipped); what is malformed is an error of its line. */
export function parseInput(text: string, endpoint: Endpoint): { lines: ParsedLine[]; errors: BatchError[] } {
  const lines: ParsedLine[] = []
  const errors: BatchError[] = []
  const seen = new Set<string>()
  text.split('\n').forEach((raw, i) => {
    const number = i + 1
    if (raw.trim() === '') return
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch {
      errors.push(lineError(number, 'invalid_json_line', `Line ${number} is not valid JSON.`))
      return
    }
    if (!isObject(value)) {
      errors.push(lineError(number, 'invalid_json_line', `Line ${number} is not a JSON object.`))
      return
    }
    const { custom_id: customId, method, url, body } = value
    if (typeof customId !== 'string' || customId === '' || customId.length > 512) {
      errors.push(
        lineError(number, 'missing_required_parameter', `Line ${number} has no custom_id (a string).`, 'custom_id'),
      )
      return
    }
    if (seen.has(customId)) {
      errors.push(
        lineError(number, 'duplicate_custom_id', `Line ${number} repeats a custom_id of an earlier line.`, 'custom_id'),
      )
      return
    }
    seen.add(customId)
    if (method !== 'POST') {
      errors.push(lineError(number, 'invalid_method', `Line ${number}: method must be "POST".`, 'method'))
      return
    }
    if (typeof url !== 'string' || batchEndpointOf(url) !== endpoint) {
      errors.push(lineError(number, 'mismatched_endpoint', `Line ${number}: url must be the batch's endpoint.`, 'url'))
      return
    }
    if (!isObject(body)) {
      errors.push(lineError(number, 'missing_required_parameter', `Line ${number} has no body (an object).`, 'body'))
      return
    }
    lines.push({ index: number, customId, body })
  })
  return { lines, errors }
}

export interface LineCheckDeps {
  readonly corridor: Corridor
  readonly ownership: OwnershipStore
}

/**
 * One line's body as intake checks a live call's; the call it runs as. Throws a
 * GatewayError saying what is wrong (batchErrorOf turns it into the line's error).
 */
export async function prepareLine(
  deps: LineCheckDeps,
  runtime: Runtime,
  principal: Principal,
  spec: EndpointSpec,
  value: Record<string, unknown>,
): Promise<PreparedCall> {
  const { config, registry } = runtime
  const body: RequestBody = { kind: 'json', value }
  const query = new URLSearchParams()
  validateBody(spec.endpoint, body, query)
  const modelName = modelOf(body)
  const route = registry.model(modelName)
  if (route === undefined || !spec.modelKinds?.includes(route.config.kind)) {
    throw new GatewayError('model_not_found', {
      message: `The model '${/^[\w.:/@-]{1,128}$/.test(modelName) ? modelName : '(unprintable)'}' does not exist or cannot be used with this endpoint.`,
      param: 'model',
    })
  }
  checkTranslatable(spec.endpoint, body, route)
  await checkOwnership(deps.ownership, spec, {}, query, body, principal.owner)
  const resolved = resolveLimits(config.plans, principal.key, modelName)
  const estimate = estimateUsage(spec.endpoint, value, {
    defaultMaxTokens: config.defaultMaxTokens,
    contextTokens: route.config.contextTokens,
    outputCap: config.plans.tiers[resolved.tier]?.outputCap,
    outputCeiling: route.config.meta?.max_output_length,
  })
  // Scopes (endpoint and model) are checked here, on the configuration in force now.
  return deps.corridor.restore(principal, spec, { params: {}, query, body, modelName, estimate, batch: true })
}

/** A line's refusal as the batch's error list shows it. */
export function batchErrorOf(line: number, error: unknown): BatchError {
  const known = toGatewayError(error)
  return lineError(line, known.code ?? known.errorName, `Line ${line}: ${known.message}`, known.param)
}
