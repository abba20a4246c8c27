// Azure OpenAI's paths, served as aliases of their /v2 twins: an Azure OpenAI client (the
// openai SDKs' AzureOpenAI, LlamaIndex's, as the provider's LlamaIndex page configures it)
// pointed at /v2 calls /v2/openai/deployments/{deployment}/chat/completions?api-version=…
// with its key in an `api-key` header (accepted everywhere a Bearer key is: presented-key.ts).
// The aliases are the paths the SDK puts a deployment in; each walks its twin's corridor
// (scopes, limits, metering, upstream path) under its twin's endpoint name.
//
// The deployment is the model, as on Azure, where the body's `model` is not what runs:
// Azure's own samples send `model: ""` beside a deployment. So a JSON body's model is set
// to the deployment (and the call is charged, scoped and routed as that model). A
// multipart form is forwarded to the upstream byte for byte, so its model cannot be set:
// it must name the deployment already, or the upstream would run one model while the
// limits counted another. `api-version` is Azure's, not the upstream's: it is taken off
// the query before anything else reads it.
//
// Azure's Responses API names no deployment in its path: AzureOpenAI's `responses.create`
// calls {endpoint}/openai/responses?api-version=… with the deployment as the body's model,
// which /v2's twin reads as it is.
import { gatewayError } from '../errors.ts'
import type { RequestBody } from '../http/body.ts'
import { PROXIED_ENDPOINTS, type EndpointSpec } from './endpoints.ts'

/** Routes under the API prefix whose Azure twin names a deployment (the SDK's `_deployments_endpoints` we serve). */
const DEPLOYMENT_ROUTES = new Set([
  '/chat/completions',
  '/completions',
  '/embeddings',
  '/audio/transcriptions',
  '/audio/translations',
  '/images/generations',
  '/images/edits',
])

/** Routes under the API prefix whose Azure twin is under /openai with the model in the body. */
const BODY_MODEL_ROUTES = new Set(['/responses'])

const AZURE_ROOT = '/openai'
export const AZURE_PREFIX = `${AZURE_ROOT}/deployments/:deployment`

export const AZURE_ENDPOINTS: readonly EndpointSpec[] = [
  ...PROXIED_ENDPOINTS.filter((spec) => DEPLOYMENT_ROUTES.has(spec.route)).map((spec) => ({
    ...spec,
    route: `${AZURE_PREFIX}${spec.route}`,
    modelParam: 'deployment',
  })),
  ...PROXIED_ENDPOINTS.filter((spec) => BODY_MODEL_ROUTES.has(spec.route)).map((spec) => ({
    ...spec,
    route: `${AZURE_ROOT}${spec.route}`,
  })),
]

/** The route an Azure-style alias stands for (its twin's), or undefined for a route that is not one. */
export function azureTwinOf(route: string): string | undefined {
  if (route.startsWith(`${AZURE_PREFIX}/`)) return route.slice(AZURE_PREFIX.length)
  if (route.startsWith(`${AZURE_ROOT}/`)) return route.slice(AZURE_ROOT.length)
  return undefined
}

/** The query an Azure-style call's twin sees: without `api-version`. */
export function withoutApiVersion(query: URLSearchParams): URLSearchParams {
  const out = new URLSearchParams(query)
  out.delete('api-version')
  return out
}

/** The body of a call whose model is named by its path (see above). */
export function withPathModel(body: RequestBody, model: string): RequestBody {
  if (body.kind === 'json') return { kind: 'json', value: { ...body.value, model } }
  if (body.kind === 'multipart' && body.fields.model !== model) {
    throw gatewayError('invalid_body', {
      message:
        "On an Azure-style path the form's model must be the deployment the path names: the form is forwarded as it was sent.",
      param: 'model',
    })
  }
  return body
}
