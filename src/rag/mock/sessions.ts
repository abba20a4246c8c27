// chat-session-manager: sessions (list, create), their history, feedback on an answer.
// A session is created as the provider's guides create one: {title, config: {localConfigId,
// globalContext, activeFiles?, chatModel}}, and named by `sessionId`. The mock checks the
// config's shape only: the files and configurations live in other services.
import { keepNewest } from './bounded.ts'
import { callerId, decodedSegment, mockId, readJson, reply, detail, type MockExchange } from './reply.ts'

interface Session {
  readonly sessionId: string
  readonly title: string
  readonly owner: string
  readonly created_at: string
  readonly config: SessionConfig
}

interface SessionConfig {
  readonly localConfigId?: string
  readonly globalContext?: boolean
  readonly activeFiles?: readonly string[]
  readonly chatModel?: string
}

/** The session config as the guides send it, or what is wrong with it. */
function sessionConfig(value: unknown): SessionConfig | string {
  if (value === undefined) return {}
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'config must be an object'
  const c = value as Record<string, unknown>
  for (const field of ['localConfigId', 'chatModel'] as const) {
    if (c[field] !== undefined && typeof c[field] !== 'string') return `config.${field} must be a string`
  }
  if (c.globalContext !== undefined && typeof c.globalContext !== 'boolean')
    return 'config.globalContext must be a boolean'
  if (
    c.activeFiles !== undefined &&
    !(Array.isArray(c.activeFiles) && c.activeFiles.every((f) => typeof f === 'string'))
  )
    return 'config.activeFiles must be a list of file ids'
  // Only the fields the mock knows are kept: anything else the client sent (a value nested
  // ten thousand deep, say) would be stored and then break every later listing.
  const known: Record<string, unknown> = {}
  for (const field of ['localConfigId', 'globalContext', 'activeFiles', 'chatModel'] as const)
    if (c[field] !== undefined) known[field] = c[field]
  return known
}

const EPOCH = '2025-01-01T00:00:00Z'
const MAX_SESSIONS_PER_CALLER = 1000
const MAX_CALLERS = 10_000

export function createSessionService(): (x: MockExchange) => Promise<boolean> {
  const created = new Map<string, Session[]>()
  let sequence = 0
  const sessionsOf = (owner: string): Session[] => [
    {
      sessionId: mockId('sess', owner, 'welcome'),
      title: 'Mock session: welcome',
      owner,
      created_at: EPOCH,
      config: { globalContext: true },
    },
    ...(created.get(owner) ?? []),
  ]
  return async (x) => {
    const owner = callerId(x.req)
    const method = x.req.method
    if (/^\/api\/v1\/sessions\/?$/.test(x.path)) {
      if (method === 'GET') {
        reply(x, 200, { sessions: sessionsOf(owner) })
        return true
      }
      if (method === 'POST') {
        const body = await readJson(x.req)
        const title = typeof body.title === 'string' ? body.title : 'Mock session'
        const config = sessionConfig(body.config)
        if (typeof config === 'string') {
          detail(x, 422, `${config} (mock)`)
          return true
        }
        const list = created.get(owner) ?? []
        const session: Session = {
          sessionId: mockId('sess', owner, title, String(sequence++)),
          title,
          owner,
          created_at: EPOCH,
          config,
        }
        // Bounded: the newest sessions of the newest callers.
        created.delete(owner)
        created.set(owner, [...list.slice(-(MAX_SESSIONS_PER_CALLER - 1)), session])
        keepNewest(created, MAX_CALLERS)
        reply(x, 201, { ...session })
        return true
      }
      return false
    }
    const match = /^\/api\/v1\/sessions\/([^/]+)\/(history|feedback)\/?$/.exec(x.path)
    if (match === null) return false
    const id = decodedSegment(match[1] ?? '')
    if (id === undefined) return false
    // As FastAPI does, a body is read before the route answers (a refusal included).
    const body = method === 'POST' ? await readJson(x.req) : {}
    if (!sessionsOf(owner).some((s) => s.sessionId === id)) {
      detail(x, 404, 'Session not found (mock)')
      return true
    }
    if (match[2] === 'history' && method === 'GET') {
      reply(x, 200, {
        sessionId: id,
        messages: [
          { id: mockId('msg', id, '0'), role: 'user', content: 'What is this service?' },
          {
            id: mockId('msg', id, '1'),
            role: 'assistant',
            content: 'This answer comes from the Tollgate mock RAG backend.',
          },
        ],
      })
      return true
    }
    if (match[2] === 'feedback' && method === 'POST') {
      const rating = body.rating
      if (rating !== 'up' && rating !== 'down' && typeof rating !== 'number') {
        detail(x, 422, 'rating must be "up", "down" or a number (mock)')
        return true
      }
      reply(x, 201, { sessionId: id, message_id: body.message_id ?? null, rating, status: 'recorded' })
      return true
    }
    return false
  }
}
