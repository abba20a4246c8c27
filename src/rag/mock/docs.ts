// Each mock service's /openapi.json, /redoc and /docs, as a FastAPI app serves them. The
// reference lists the routes the mock answers: first those of the provider's SmartChat
// guides (local-chat, global-chat), then the mock's own.
import type { MockExchange } from './reply.ts'

interface RouteDoc {
  readonly method: 'get' | 'post' | 'put' | 'patch' | 'delete'
  readonly path: string
  readonly summary: string
}

const ROUTES: Readonly<Record<string, readonly RouteDoc[]>> = {
  'config-manager': [
    {
      method: 'get',
      path: '/api/v1/user/configs',
      summary: 'The caller\'s user groups ("default" first), each with its localKbConfigs (id, allowed_llms).',
    },
    { method: 'get', path: '/api/v1/configurations/', summary: 'Every RAG configuration.' },
    { method: 'post', path: '/api/v1/configurations/', summary: 'Creates a configuration {name, ...}.' },
    { method: 'get', path: '/api/v1/configurations/{name}', summary: 'One configuration.' },
    { method: 'put', path: '/api/v1/configurations/{name}', summary: 'Changes a configuration.' },
    { method: 'delete', path: '/api/v1/configurations/{name}', summary: 'Deletes a configuration.' },
  ],
  'user-manager': [
    { method: 'get', path: '/api/v1/users/me', summary: 'The caller.' },
    { method: 'get', path: '/api/v1/users/', summary: 'Users.' },
    { method: 'post', path: '/api/v1/users/', summary: 'Creates a user {username, roles?, groups?}.' },
    { method: 'get', path: '/api/v1/roles/', summary: 'Roles.' },
    { method: 'get', path: '/api/v1/groups/', summary: 'Groups.' },
  ],
  'file-manager': [
    {
      method: 'post',
      path: '/api/v1/files/',
      summary:
        'Uploads files (multipart field "files", repeated; query kb=local|global). Answers a list of ' +
        '{fileId, userId, fileName, fileUri, status}: "pending", then "uploaded" or "duplicated"; or at once "error", "file_too_large", "file_type_not_supported".',
    },
    {
      method: 'get',
      path: '/api/v1/files/',
      summary: "The caller's files in a knowledge base (query kb), only those named by fileIds (repeated) when given.",
    },
    { method: 'post', path: '/api/v1/files/upload', summary: "The same upload, under the mock's earlier path." },
  ],
  'ingest-master': [
    {
      method: 'post',
      path: '/api/v1/task',
      summary:
        'Queues the ingestion of a file {filePath, role, metadata}; answers the task: "queued", then "ingesting", then "ingested" or "ingestion_failed".',
    },
    {
      method: 'post',
      path: '/api/v1/tasks/file',
      summary: 'The tasks of one file (query file_path, role), oldest first.',
    },
    { method: 'post', path: '/api/v1/ingest', summary: "Ingests files at once {file_ids} (the mock's earlier route)." },
  ],
  'chat-session-manager': [
    { method: 'get', path: '/api/v1/sessions/', summary: "The caller's sessions." },
    {
      method: 'post',
      path: '/api/v1/sessions/',
      summary:
        'Creates a session {title, config: {localConfigId, globalContext, activeFiles?, chatModel}}; answers its sessionId.',
    },
    { method: 'get', path: '/api/v1/sessions/{sessionId}/history', summary: "A session's messages." },
    {
      method: 'post',
      path: '/api/v1/sessions/{sessionId}/feedback',
      summary: 'Feedback on an answer {message_id, rating}.',
    },
  ],
  'query-pipeline': [
    {
      method: 'post',
      path: '/api/v1/chat',
      summary:
        'Answers a prompt {sessionId, userPrompt}: JSON, or an SSE stream with "stream": true or Accept: text/event-stream.',
    },
    {
      method: 'post',
      path: '/api/v1/query',
      summary: "The same, under the mock's earlier path and fields {query, session_id}.",
    },
  ],
}

function pathsOf(service: string): Record<string, Record<string, unknown>> {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of ROUTES[service] ?? []) {
    paths[route.path] = {
      ...paths[route.path],
      [route.method]: { summary: route.summary, responses: { 200: { description: 'Successful Response' } } },
    }
  }
  return paths
}

export function serveDocs(x: MockExchange): boolean {
  if (x.req.method !== 'GET') return false
  if (x.path === '/openapi.json') {
    const body = JSON.stringify({
      openapi: '3.1.0',
      info: {
        title: `${x.service} (Tollgate mock)`,
        version: '0.0.0-mock',
        description: 'The built-in mock of this RAG service: deterministic answers that say they come from a mock.',
      },
      paths: pathsOf(x.service),
    })
    x.res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
    x.res.end(body)
    return true
  }
  if (x.path === '/redoc' || x.path === '/docs') {
    const body =
      `<!doctype html><html><head><title>${x.service} - ${x.path === '/redoc' ? 'ReDoc' : 'Swagger UI'} (mock)</title></head>` +
      `<body><p>Tollgate mock of ${x.service}: the API reference would load <code>openapi.json</code> here.</p></body></html>\n`
    x.res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body) })
    x.res.end(body)
    return true
  }
  return false
}
