// chat-session-manager: sessions (list, create), their history, feedback on an answer.
import { callerId, mockId, readJson, reply, detail, type MockExchange } from './reply.ts'

interface Session {
  readonly id: string
  readonly title: string
  readonly owner: string
  readonly created_at: string
}

const EPOCH = '2025-01-01T00:00:00Z'

export function createSessionService(): (x: MockExchange) => Promise<boolean> {
  const created = new Map<string, Session[]>()
  const sessionsOf = (owner: string): Session[] => [
    { id: mockId('sess', owner, 'welcome'), title: 'Mock session: welcome', owner, created_at: EPOCH },
    ...created.get(owner) ?? [],
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
        const list = created.get(owner) ?? []
        const session = { id: mockId('sess', owner, title, String(list.length)), title, owner, created_at: EPOCH }
        created.set(owner, [...list, session])
        reply(x, 201, { ...session })
        return true
      }
      return false
    }
    const match = /^\/api\/v1\/sessions\/([^/]+)\/(history|feedback)\/?$/.exec(x.path)
    if (match === null) return false
    const id = decodeURIComponent(match[1] ?? '')
    if (!sessionsOf(owner).some((s) => s.id === id)) {
      detail(x, 404, 'Session not found (mock)')
      return true
    }
    if (match[2] === 'history' && method === 'GET') {
      reply(x, 200, {
        session_id: id,
        messages: [
          { id: mockId('msg', id, '0'), role: 'user', content: 'What is this service?' },
          { id: mockId('msg', id, '1'), role: 'assistant', content: 'This answer comes from the Tollgate mock RAG backend.' },
        ],
      })
      return true
    }
    if (match[2] === 'feedback' && method === 'POST') {
      const body = await readJson(x.req)
      const rating = body.rating
      if (rating !== 'up' && rating !== 'down' && typeof rating !== 'number') {
        detail(x, 422, 'rating must be "up", "down" or a number (mock)')
        return true
      }
      reply(x, 201, { session_id: id, message_id: body.message_id ?? null, rating, status: 'recorded' })
      return true
    }
    return false
  }
}
