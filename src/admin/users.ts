// /admin/users: the RAG gateway's accounts (INTERFACE.md §5). No reply and no log line
// holds a password or its hash.
import { z } from 'zod'
import { createUserSchema, updateUserSchema, type AccountService } from '../accounts/service.ts'
import type { AdminAuthenticator } from '../auth/admin.ts'
import type { Config } from '../config/schema.ts'
import { readJsonBody } from '../http/body.ts'
import { bodyRateOf } from '../http/body-rate.ts'
import { gatewayError } from '../errors.ts'
import { User, UserList } from '../api/users.ts'
import type { OperationDoc } from '../openapi/operation.ts'
import type { Router } from '../http/router.ts'
import { sendAdmin } from './http.ts'

export interface UserAdminDeps {
  readonly config: Pick<Config, 'server'>
  readonly accounts: AccountService
  readonly authenticateAdmin: AdminAuthenticator
}

export function registerUserRoutes(router: Router, deps: UserAdminDeps): void {
  const { accounts, authenticateAdmin } = deps
  const limit = deps.config.server.jsonBodyLimitBytes
  const rate = bodyRateOf(deps.config.server)

  router.on('POST', '/admin/users', async (ctx) => {
    ctx.route = 'admin.users.create'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const record = await accounts.create(body.value)
    ctx.log.info(
      { audit: 'user.created', userId: record.id, username: record.username, tenant: record.tenant },
      'admin: user created',
    )
    sendAdmin(ctx, 201, accounts.view(record))
  })

  router.on('GET', '/admin/users', async (ctx) => {
    ctx.route = 'admin.users.list'
    authenticateAdmin(ctx.req)
    sendAdmin(ctx, 200, { object: 'list', data: (await accounts.list()).map((r) => accounts.view(r)) })
  })

  router.on('GET', '/admin/users/:username', async (ctx, params) => {
    ctx.route = 'admin.users.get'
    authenticateAdmin(ctx.req)
    const record = await accounts.get(params.username ?? '')
    if (record === null) throw gatewayError('resource_not_found', { message: 'No such user.', param: 'username' })
    sendAdmin(ctx, 200, accounts.view(record))
  })

  router.on('PATCH', '/admin/users/:username', async (ctx, params) => {
    ctx.route = 'admin.users.update'
    authenticateAdmin(ctx.req)
    const body = await readJsonBody(ctx.req, limit, rate)
    const record = await accounts.update(params.username ?? '', body.value)
    ctx.log.info(
      { audit: 'user.updated', userId: record.id, fields: Object.keys(body.value).filter((f) => /^\w{1,32}$/.test(f)) },
      'admin: user updated',
    )
    sendAdmin(ctx, 200, accounts.view(record))
  })

  router.on('DELETE', '/admin/users/:username', async (ctx, params) => {
    ctx.route = 'admin.users.delete'
    authenticateAdmin(ctx.req)
    const record = await accounts.remove(params.username ?? '')
    ctx.log.info({ audit: 'user.deleted', userId: record.id }, 'admin: user deleted')
    sendAdmin(ctx, 200, { ...accounts.view(record), deleted: true })
  })
}

const TAG = 'Admin: users'
const user = { username: "The user's username." }
const admin = { security: 'admin' } as const

export const USER_ADMIN_OPERATIONS: readonly OperationDoc[] = [
  {
    ...admin,
    method: 'post',
    path: '/admin/users',
    operationId: 'createUser',
    tag: TAG,
    summary: 'Create a RAG gateway user',
    description:
      'The password is kept only as a scrypt hash. `tenant` defaults to `default`. A taken username is a 409.',
    body: { contentType: 'application/json', schema: createUserSchema },
    responses: { 201: { description: 'Created', schema: User } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/users',
    operationId: 'listUsers',
    tag: TAG,
    summary: 'List RAG gateway users',
    responses: { 200: { description: 'OK, by username', schema: UserList } },
  },
  {
    ...admin,
    method: 'get',
    path: '/admin/users/{username}',
    operationId: 'retrieveUser',
    tag: TAG,
    summary: 'Retrieve a user',
    pathParams: user,
    responses: { 200: { description: 'OK', schema: User } },
  },
  {
    ...admin,
    method: 'patch',
    path: '/admin/users/{username}',
    operationId: 'updateUser',
    tag: TAG,
    summary: 'Change a user',
    description:
      "Roles, groups, tenant, password, disabled; a field left out stays. A new password ends the user's sessions; a disabled user's tokens are refused.",
    pathParams: user,
    body: { contentType: 'application/json', schema: updateUserSchema },
    responses: { 200: { description: 'OK', schema: User } },
  },
  {
    ...admin,
    method: 'delete',
    path: '/admin/users/{username}',
    operationId: 'deleteUser',
    tag: TAG,
    summary: 'Delete a user',
    description: 'Its access tokens are refused from then on (within `ragAuth.revocationCacheMs` on other instances).',
    pathParams: user,
    responses: { 200: { description: 'The deleted user', schema: User.extend({ deleted: z.literal(true) }) } },
  },
]
