// user-manager (users, roles, groups) and config-manager (tenant and RAG configurations).
import {
  callerGroups,
  callerId,
  decodedSegment,
  readJson,
  reply,
  replyList,
  detail,
  type MockExchange,
} from './reply.ts'

const ROLES = [
  { name: 'admin', description: 'Manages the tenant (mock)' },
  { name: 'user', description: 'Chats and uploads (mock)' },
]
const GROUPS = [
  { name: 'research', members: 2 },
  { name: 'support', members: 1 },
]
const USERS = [
  { id: 'mock-user-1', username: 'alice', roles: ['admin'], groups: ['research'] },
  { id: 'mock-user-2', username: 'bob', roles: ['user'], groups: ['research', 'support'] },
]

export function createUserService(): (x: MockExchange) => Promise<boolean> {
  return async (x) => {
    const get = x.req.method === 'GET'
    if (/^\/api\/v1\/users\/me\/?$/.test(x.path) && get) {
      reply(x, 200, { id: callerId(x.req) })
      return true
    }
    if (/^\/api\/v1\/users\/?$/.test(x.path)) {
      if (get) reply(x, 200, { users: USERS })
      else if (x.req.method === 'POST') {
        const body = await readJson(x.req)
        if (typeof body.username !== 'string') detail(x, 422, 'username is required (mock)')
        else
          reply(x, 201, {
            id: `mock-${body.username}`,
            username: body.username,
            roles: body.roles ?? [],
            groups: body.groups ?? [],
          })
      } else return false
      return true
    }
    if (/^\/api\/v1\/roles\/?$/.test(x.path) && get) {
      reply(x, 200, { roles: ROLES })
      return true
    }
    if (/^\/api\/v1\/groups\/?$/.test(x.path) && get) {
      reply(x, 200, { groups: GROUPS })
      return true
    }
    return false
  }
}

export function createConfigService(): (x: MockExchange) => Promise<boolean> {
  const configs = new Map<string, Record<string, unknown>>([
    ['default', { name: 'default', retriever: 'hybrid', top_k: 5, llm: 'mock-llm', temperature: 0 }],
  ])
  return async (x) => {
    if (/^\/api\/v1\/user\/configs\/?$/.test(x.path) && x.req.method === 'GET') {
      replyList(x, 200, userConfigs(configs, callerGroups(x.req)))
      return true
    }
    if (/^\/api\/v1\/configurations\/?$/.test(x.path)) {
      if (x.req.method === 'GET') reply(x, 200, { configurations: [...configs.values()] })
      else if (x.req.method === 'POST') {
        const body = await readJson(x.req)
        const name = typeof body.name === 'string' ? body.name : null
        if (name === null) detail(x, 422, 'name is required (mock)')
        else {
          configs.set(name, { ...body, name })
          reply(x, 201, { configuration: configs.get(name) })
        }
      } else return false
      return true
    }
    const match = /^\/api\/v1\/configurations\/([^/]+)\/?$/.exec(x.path)
    if (match === null) return false
    const name = decodedSegment(match[1] ?? '')
    if (name === undefined) return false
    if (x.req.method === 'GET') {
      const found = configs.get(name)
      if (found === undefined) detail(x, 404, 'Configuration not found (mock)')
      else reply(x, 200, { configuration: found })
      return true
    }
    if (x.req.method === 'PUT' || x.req.method === 'PATCH') {
      const body = await readJson(x.req)
      configs.set(name, { ...configs.get(name), ...body, name })
      reply(x, 200, { configuration: configs.get(name) })
      return true
    }
    if (x.req.method === 'DELETE') {
      configs.delete(name)
      reply(x, 200, { deleted: name })
      return true
    }
    return false
  }
}

/**
 * GET /api/v1/user/configs, as the provider's guides read it: one entry per user group of
 * the caller ("default" for everyone, then the caller's groups), each with the local KB
 * configurations it may chat with (`id`, `allowed_llms[].name`). The mock offers every
 * configuration to every group; a configuration's `llm` is its one allowed model.
 */
function userConfigs(
  configs: ReadonlyMap<string, Record<string, unknown>>,
  groups: readonly string[],
): Array<Record<string, unknown>> {
  const localKbConfigs = [...configs.values()].map((c) => ({
    ...c,
    id: c.name,
    allowed_llms: [{ name: typeof c.llm === 'string' ? c.llm : 'mock-llm' }],
  }))
  return [...new Set(['default', ...groups])].map((userGroupId) => ({ userGroupId, localKbConfigs }))
}
