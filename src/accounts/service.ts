// RAG gateway accounts: create, read, change, remove, and check a login. The one place
// accounts are handled; the admin API, the CLI (through it) and login all use it.
import { randomBytes } from 'node:crypto'
import { z } from 'zod'
import { gatewayError } from '../errors.ts'
import type { Events } from '../events/types.ts'
import { parseBody } from '../keys/service.ts'
import { StoreConflictError } from '../store/errors.ts'
import type { AccountRecord, AccountStore } from '../store/ports.ts'
import { dummyPasswordHash, hashPassword, verifyPassword } from './password.ts'

/** Rounds of read, apply, compare-and-set before a change to a busy account gives up. */
const CHANGE_ATTEMPTS = 8
export const DEFAULT_TENANT = 'default'

export const USERNAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/

const username = z.string().regex(USERNAME, 'letters, digits and . _ @ -, at most 64, starting with a letter or digit')
/** Long enough to mean something; bounded so one login cannot buy a megabyte of hashing. */
export const password = z.string().min(8).max(1024)
const nameList = z.array(z.string().regex(NAME, 'letters, digits and . _ : @ -, at most 64')).max(64)
const tenant = z.string().regex(NAME, 'letters, digits and . _ : @ -, at most 64')

export const createUserSchema = z.strictObject({
  username,
  password,
  roles: nameList.optional(),
  groups: nameList.optional(),
  tenant: tenant.optional(),
  disabled: z.boolean().optional(),
})

/** What PATCH may change; a field left out stays. A new password ends the user's sessions. */
export const updateUserSchema = z.strictObject({
  password: password.optional(),
  roles: nameList.optional(),
  groups: nameList.optional(),
  tenant: tenant.optional(),
  disabled: z.boolean().optional(),
})

/** An account as the admin API shows it: never the password hash. */
export interface UserView {
  readonly object: 'user'
  readonly id: string
  readonly username: string
  readonly roles: readonly string[]
  readonly groups: readonly string[]
  readonly tenant: string
  readonly disabled: boolean
  readonly created_at: string
  readonly updated_at: string
}

export interface AccountServiceOptions {
  readonly store: AccountStore
  /** Called after an account changed or was removed (caches drop it). Should not throw. */
  readonly onChange?: (username: string) => void
  /** Where user.created and user.disabled are published (before the caller is answered). */
  readonly events?: Events
  readonly now?: () => Date
}

const unique = (xs: readonly string[]): string[] => [...new Set(xs)]

export class AccountService {
  readonly #store: AccountStore
  readonly #now: () => Date
  readonly #onChange: (username: string) => void
  readonly #events: Events | undefined

  constructor(options: AccountServiceOptions) {
    this.#events = options.events
    this.#store = options.store
    this.#now = options.now ?? (() => new Date())
    this.#onChange = options.onChange ?? (() => {})
  }

  async create(input: unknown): Promise<AccountRecord> {
    const body = parseBody(createUserSchema, input)
    const now = this.#now().toISOString()
    const record: AccountRecord = {
      id: `usr_${randomBytes(12).toString('hex')}`,
      username: body.username,
      passwordHash: await hashPassword(body.password),
      roles: unique(body.roles ?? []),
      groups: unique(body.groups ?? []),
      tenant: body.tenant ?? DEFAULT_TENANT,
      disabled: body.disabled ?? false,
      sessionsValidFrom: now,
      createdAt: now,
      updatedAt: now,
    }
    try {
      await this.#store.insert(record)
    } catch (err) {
      if (err instanceof StoreConflictError)
        throw gatewayError('conflict', { message: 'This username is taken.', param: 'username' })
      throw err
    }
    await this.#announce('user.created', record)
    return record
  }

  /** null for an unknown username (and for anything that is not one, without a store read). */
  get(name: string): Promise<AccountRecord | null> {
    if (!USERNAME.test(name)) return Promise.resolve(null)
    return this.#store.get(name)
  }

  list(): Promise<AccountRecord[]> {
    return this.#store.list()
  }

  async update(name: string, input: unknown): Promise<AccountRecord> {
    const body = parseBody(updateUserSchema, input)
    const passwordHash = body.password === undefined ? undefined : await hashPassword(body.password)
    for (let attempt = 0; attempt < CHANGE_ATTEMPTS; attempt++) {
      const current = await this.get(name)
      if (current === null) throw notFound()
      const now = this.#now().toISOString()
      const next: AccountRecord = {
        ...current,
        ...(passwordHash === undefined ? {} : { passwordHash, sessionsValidFrom: now }),
        ...(body.roles === undefined ? {} : { roles: unique(body.roles) }),
        ...(body.groups === undefined ? {} : { groups: unique(body.groups) }),
        ...(body.tenant === undefined ? {} : { tenant: body.tenant }),
        ...(body.disabled === undefined ? {} : { disabled: body.disabled }),
        updatedAt: now,
      }
      const outcome = await this.#store.replace(next, current)
      if (outcome === 'missing') throw notFound()
      if (outcome === 'replaced') {
        this.#onChange(name)
        if (next.disabled && !current.disabled) await this.#announce('user.disabled', next)
        return next
      }
    }
    throw gatewayError('conflict', { message: 'The user kept changing; try again.' })
  }

  async remove(name: string): Promise<AccountRecord> {
    const current = await this.get(name)
    if (current === null || !(await this.#store.remove(name))) throw notFound()
    this.#onChange(name)
    return current
  }

  /**
   * The account if the username and password are right and it is enabled, else null. An
   * unknown username costs the same scrypt as a wrong password, so the two cannot be told
   * apart by the answer or its time.
   */
  async checkLogin(name: string, secret: string): Promise<AccountRecord | null> {
    const account = await this.get(name)
    const matches = await verifyPassword(secret, account?.passwordHash ?? (await dummyPasswordHash()))
    return account !== null && matches && !account.disabled ? account : null
  }

  /** A store that cannot take the event does not undo the change: the publisher logs it as lost. */
  async #announce(type: 'user.created' | 'user.disabled', record: AccountRecord): Promise<void> {
    await this.#events
      ?.publish(type, { user_id: record.id, username: record.username, tenant: record.tenant })
      .catch(() => null)
  }

  view(record: AccountRecord): UserView {
    return {
      object: 'user',
      id: record.id,
      username: record.username,
      roles: record.roles,
      groups: record.groups,
      tenant: record.tenant,
      disabled: record.disabled,
      created_at: record.createdAt,
      updated_at: record.updatedAt,
    }
  }
}

function notFound(): Error {
  return gatewayError('resource_not_found', { message: 'No such user.', param: 'username' })
}
