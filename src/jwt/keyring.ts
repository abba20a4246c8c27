// The gateway's JWT signing keys (Ed25519), kept in the store so every instance signs and
// verifies with the same ones. The newest key signs. Every `rotationMs` one instance adds a
// new key (the store's compare-and-set lets one win when several try); the previous keys
// stay published and accepted until every token they may have signed has expired, then
// they are dropped. An unknown kid makes an instance re-read the store once (concurrent
// callers share that read), so a key another instance just made is found at once.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto'
import type { Logger } from '../observability/logger.ts'
import { createTaskOutage } from '../observability/outage-log.ts'
import type { SigningKeyRecord, SigningKeyStore } from '../store/ports.ts'
import type { Sealer } from './seal.ts'

export interface Signer {
  readonly kid: string
  readonly privateKey: KeyObject
}

export interface PublicJwk {
  readonly kty: string
  readonly crv: string
  readonly x: string
  readonly kid: string
  readonly alg: 'EdDSA'
  readonly use: 'sig'
}

export interface Keyring {
  /** The key to sign with now; makes the first one, or the next when rotation is due. */
  signer(): Promise<Signer>
  /** The public key of `kid`, or null if no instance has such a key. */
  publicKey(kid: string): Promise<KeyObject | null>
  /** The published keys, newest last (as served at /.well-known/jwks.json). */
  jwks(): Promise<{ keys: PublicJwk[] }>
  /** The record of the key that signs now, as last read from the store (null before the first read). */
  current(): SigningKeyRecord | null
  /** Makes a new signing key now (whatever the schedule says). */
  rotate(): Promise<void>
  /** Checks the schedule every so often (and once now, tolerating a store that is down). */
  start(): Promise<void>
  close(): void
}

export interface KeyringOptions {
  readonly store: SigningKeyStore
  readonly sealer: Sealer
  readonly rotationMs: number
  /** The access tokens' lifetime: how long a replaced key must still verify. */
  readonly accessTokenTtlMs: number
  readonly log: Logger
  readonly now?: () => number
}

interface LoadedKey {
  readonly record: SigningKeyRecord
  readonly publicKey: KeyObject
  privateKey?: KeyObject
}

export function createKeyring(options: KeyringOptions): Keyring {
  const { store, sealer, rotationMs, accessTokenTtlMs, log } = options
  const now = options.now ?? Date.now
  // How often the store is re-read: another instance may have rotated meanwhile, and this
  // one must not keep signing with a key that will soon be dropped.
  const checkMs = Math.max(100, Math.min(30_000, Math.floor(rotationMs / 4)))
  // A replaced key is kept until its successor is this old: the tokens it signed have
  // expired by then, whatever the lag of an instance that had not yet seen the successor.
  const retireAfterMs = accessTokenTtlMs + 2 * checkMs + 60_000
  let keys: LoadedKey[] = []
  let loading: Promise<void> | null = null
  let timer: NodeJS.Timeout | null = null

  function load(): Promise<void> {
    loading ??= (async () => {
      try {
        const records = await store.list()
        const known = new Map(keys.map((k) => [k.record.kid, k]))
        keys = records.map(
          (record) =>
            known.get(record.kid) ?? {
              record,
              publicKey: createPublicKey({ key: { ...record.publicJwk }, format: 'jwk' }),
            },
        )
      } finally {
        loading = null
      }
    })()
    return loading
  }

  async function addKey(expectedLatest: string | null): Promise<void> {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519')
    const jwk = publicKey.export({ format: 'jwk' })
    const publicJwk = { kty: String(jwk.kty), crv: String(jwk.crv), x: String(jwk.x) }
    const createdAt = new Date(now())
    const record: SigningKeyRecord = {
      kid: okpThumbprint(publicJwk),
      alg: 'EdDSA',
      publicJwk,
      sealedPrivateKey: sealer.seal(privateKey.export({ format: 'der', type: 'pkcs8' })),
      createdAt: createdAt.toISOString(),
      expiresAt: new Date(createdAt.getTime() + rotationMs + retireAfterMs).toISOString(),
    }
    if (await store.addIfLatest(record, expectedLatest)) log.info({ kid: record.kid }, 'JWT signing key rotated')
    await load()
  }

  /** Drops keys whose successor is old enough that nothing they signed is still valid. */
  async function retire(): Promise<void> {
    const at = now()
    for (let i = 0; i + 1 < keys.length; i++) {
      const successor = keys[i + 1]
      const key = keys[i]
      if (key === undefined || successor === undefined) continue
      if (Date.parse(successor.record.createdAt) + retireAfterMs <= at) await store.remove(key.record.kid)
    }
  }

  async function check(): Promise<void> {
    await load()
    const latest = keys.at(-1)
    if (latest === undefined || Date.parse(latest.record.createdAt) + rotationMs <= now()) {
      await addKey(latest?.record.kid ?? null)
    }
    const before = keys.length
    await retire()
    if (before > 1) await load()
  }

  const unsealed = (key: LoadedKey): KeyObject => {
    key.privateKey ??= createPrivateKey({ key: sealer.open(key.record.sealedPrivateKey), format: 'der', type: 'pkcs8' })
    return key.privateKey
  }

  return {
    async signer() {
      let latest = keys.at(-1)
      if (latest === undefined || Date.parse(latest.record.createdAt) + rotationMs <= now()) {
        await check()
        latest = keys.at(-1)
      }
      if (latest === undefined) throw new Error('no JWT signing key could be made')
      return { kid: latest.record.kid, privateKey: unsealed(latest) }
    },
    async publicKey(kid) {
      let found = keys.find((k) => k.record.kid === kid)
      if (found === undefined) {
        await load()
        found = keys.find((k) => k.record.kid === kid)
      }
      return found?.publicKey ?? null
    },
    async jwks() {
      if (keys.length === 0) await check()
      return {
        keys: keys.map(({ record: { publicJwk, kid } }): PublicJwk => ({
          kty: publicJwk.kty ?? 'OKP',
          crv: publicJwk.crv ?? 'Ed25519',
          x: publicJwk.x ?? '',
          kid,
          alg: 'EdDSA',
          use: 'sig',
        })),
      }
    },
    current() {
      return keys.at(-1)?.record ?? null
    },
    async rotate() {
      await load()
      await addKey(keys.at(-1)?.record.kid ?? null)
    },
    async start() {
      // Every checkMs during a store outage: one line when it starts failing, one when it is over.
      const outage = createTaskOutage(log, 'JWT signing keys: check')
      // One check at a time: during an outage a check waits on the store for seconds, and
      // overlapping ones ended out of order (one begun before the outage answered after the
      // first failure, closing the outage and letting the next failure open it again).
      let checking = false
      const checkOnce = async (): Promise<void> => {
        if (checking) return
        checking = true
        await check().then(
          () => outage.succeeded(),
          (err: unknown) => outage.failed(err),
        )
        checking = false
      }
      await checkOnce()
      timer = setInterval(() => void checkOnce(), checkMs)
      timer.unref()
    },
    close() {
      if (timer !== null) clearInterval(timer)
      timer = null
    },
  }
}

/**
 * The RFC 7638 thumbprint of an OKP public key (Ed25519), the key's kid: SHA-256 of its
 * required members in lexicographic order, base64url. What jose's calculateJwkThumbprint
 * gives (test/jwt/keyring.test.ts compares them), without loading jose at boot, when the
 * first key is made.
 */
export function okpThumbprint(jwk: Pick<PublicJwk, 'kty' | 'crv' | 'x'>): string {
  const members = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x })
  return createHash('sha256').update(members).digest('base64url')
}
