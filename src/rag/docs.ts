// The RAG gateway's routes in the API reference: one operation per service path and
// method, the route inside the service being the path parameter.
import { DetailBody } from '../api/common.ts'
import type { HttpMethod, OperationDoc, ResponseDoc } from '../openapi/operation.ts'
import { RAG_METHODS, RAG_SEGMENTS } from './gateway.ts'

export const RAG_TAG = 'RAG services'

const PURPOSE: Readonly<Record<string, string>> = {
  'config-manager': 'tenant and RAG configurations',
  'user-manager': 'users, roles and groups',
  'file-manager': 'files, file groups and knowledge bases (multipart uploads are streamed)',
  'ingest-master': 'orchestration of file ingestion',
  'chat-session-manager': 'chat sessions, history and feedback',
  'query-pipeline': 'chat response generation (JSON, or an SSE stream of answer tokens and sources)',
  'query-pipelines': 'the query pipeline, under its other name',
}

const REFUSALS: Readonly<Record<string, ResponseDoc>> = {
  400: {
    description: 'A path that could leave the service (dot segments, encoded slashes or backslashes, empty segments).',
    schema: DetailBody,
  },
  401: {
    description: 'No access token, or one that is invalid, expired or revoked (with `WWW-Authenticate: Bearer`).',
    schema: DetailBody,
  },
  403: { description: 'The caller lacks a role this method and path need (route rules).', schema: DetailBody },
  429: { description: 'Over the requests per minute of the user or of the tenant.', schema: DetailBody },
  502: { description: 'The service is down or unreachable.', schema: DetailBody },
  503: {
    description:
      'The gateway cannot reach its store to check the access token (with `retry-after`; keep the token and try again).',
    schema: DetailBody,
  },
  504: { description: 'The service sent no answer within its timeout.', schema: DetailBody },
}

const camel = (s: string): string => s.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())

export const RAG_OPERATIONS: readonly OperationDoc[] = RAG_SEGMENTS.flatMap(([segment]) =>
  RAG_METHODS.map((method): OperationDoc => {
    const lower = method.toLowerCase() as HttpMethod
    return {
      method: lower,
      path: `/${segment}/{route}`,
      operationId: `rag${camel(`-${segment}`)}${camel(`-${lower}`)}`,
      summary: `${method} on ${segment}: ${PURPOSE[segment] ?? segment}`,
      description:
        `Relayed to the ${segment} service's base URL with \`/${segment}\` stripped and the query kept; ` +
        'the gateway states the caller in its identity headers. `GET /' +
        segment +
        '/redoc`, `/openapi.json` and `/docs` are public by default.',
      tag: RAG_TAG,
      security: 'session',
      pathParams: { route: 'The route inside the service, e.g. `api/v1/sessions/`.' },
      rateLimited: true,
      responses: {
        200: { description: "The service's answer, relayed as it streams (status and body are the service's)." },
        ...REFUSALS,
      },
    }
  }),
)
