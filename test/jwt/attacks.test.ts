// JWT attacks against the RAG gateway's access tokens. Each forged or stale token is
// refused twice: by createAccessTokenVerifier in this process (on the gateway's Redis
// namespace, so it knows the same keys, sessions and users) and by a running gateway's
// authenticated endpoint GET /api/v1/auth/me, which answers 401 in FastAPI's shape.
import { createHmac, generateKeyPairSync, randomBytes } from 'node:crypto'
import t from 'tap'
import type { Test } from 'tap'
import { SignJWT, type JWTPayload } from 'jose'
import { GatewayError } from '../../src/errors.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { createRedisClient } from '../../src/store/redis-client.ts'
import { createRedisStores } from '../../src/store/redis.ts'
import { createKeyring } from '../../src/jwt/keyring.ts'
import { createSealer } from '../../src/jwt/seal.ts'
import { createAccessTokenVerifier } from '../../src/jwt/verifier.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { REDIS_URL, redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { b64url, call, createUser, decodePart, login, me, type Pair } from './helpers.ts'

const ns = await redisNamespace(t)
const KEY_SECRET = `attacks-${randomBytes(16).toString('hex')}`

if (!ns.up) {
  t.fail(redisMissing())
} else {
  const gw = await startTollgate({
    config: (doc) => {
      ;(doc.store as Record<string, unknown>).keyPrefix = ns.prefix
    },
    env: { REDIS_URL, TOLLGATE_KEY_SECRET: KEY_SECRET },
  })
  t.teardown(async () => {
    await gw.stop()
  })
  const client = createRedisClient(REDIS_URL, { commandTimeoutMs: 2000, name: 'tgtest-attacks' })
  const stores = createRedisStores(client, ns.prefix)
  t.teardown(() => stores.close())
  const keyring = createKeyring({
    store: stores.signingKeys,
    sealer: createSealer(KEY_SECRET),
    rotationMs: 86_400_000,
    accessTokenTtlMs: 900_000,
    log: createLogger('silent'),
  })
  const verifier = createAccessTokenVerifier({
    config: { issuer: 'tollgate', audience: 'tollgate-rag', revocationCacheMs: 0 },
    keyring,
    sessions: stores.sessions,
    accounts: stores.accounts,
  })

  await createUser(gw, { username: 'mallory', password: 'mallory password', roles: ['user'], tenant: 'acme' })
  const pair = await login(gw.url, 'mallory', 'mallory password')
  const header = decodePart(pair.access_token, 0)
  const claims = decodePart(pair.access_token, 1) as JWTPayload
  const now = Math.floor(Date.now() / 1000)

  /** The token signed with the gateway's real key, with changed claims (and header). */
  const signed = async (changes: JWTPayload, headerChanges: Record<string, unknown> = {}): Promise<string> => {
    const signer = await keyring.signer()
    t.equal(signer.kid, header.kid, "the test signs with the gateway's own key")
    return new SignJWT({ ...claims, ...changes })
      .setProtectedHeader({ alg: 'EdDSA', kid: signer.kid, typ: 'at+jwt', ...headerChanges })
      .sign(signer.privateKey)
  }

  /** Refused by the verifier (a 401 GatewayError) and by the gateway (401, detail, WWW-Authenticate). */
  const refused = async (t: Test, token: string, what: string): Promise<void> => {
    const error = await verifier.verify(token).then(
      () => null,
      (e: unknown) => e,
    )
    t.ok(error instanceof GatewayError && error.status === 401, `${what}: the verifier refuses it`)
    const reply = await me(gw.url, token)
    t.equal(reply.status, 401, `${what}: GET /api/v1/auth/me refuses it`)
    t.strictSame(reply.json, { detail: 'Could not validate credentials' })
    t.equal(reply.headers.get('www-authenticate'), 'Bearer')
  }

  t.test('the genuine token is accepted by both (the control)', async (t) => {
    const identity = await verifier.verify(pair.access_token)
    t.match(identity, {
      username: 'mallory',
      roles: ['user'],
      tenant: 'acme',
      source: 'local',
      token: pair.access_token,
    })
    const reply = await me(gw.url, pair.access_token)
    t.equal(reply.status, 200)
    t.match(reply.json, { username: 'mallory', user_id: identity.userId, source: 'local' })
    t.match(header, { alg: 'EdDSA', typ: 'at+jwt' })
    t.type(header.kid, 'string')
    for (const claim of ['iss', 'aud', 'sub', 'iat', 'exp', 'nbf', 'jti', 'sid', 'roles', 'groups', 'tenant'])
      t.ok(claim in claims, `claim ${claim}`)
  })

  t.test('alg none', async (t) => {
    const token = `${b64url({ alg: 'none', typ: 'at+jwt', kid: header.kid })}.${b64url(claims)}.`
    await refused(t, token, 'alg none')
    await refused(
      t,
      `${b64url({ alg: 'none', typ: 'at+jwt', kid: header.kid })}.${b64url(claims)}`,
      'alg none without a signature part',
    )
  })

  t.test('HS256 signed with the public key', async (t) => {
    const jwks = await call(gw.url, 'GET', '/.well-known/jwks.json')
    const jwk = (jwks.json.keys as Array<Record<string, string>>).find((k) => k.kid === header.kid)
    t.ok(jwk, 'the key is published')
    const { createPublicKey } = await import('node:crypto')
    const pem = createPublicKey({ key: { ...jwk }, format: 'jwk' })
      .export({ format: 'pem', type: 'spki' })
      .toString()
    for (const secret of [pem, Buffer.from(jwk?.x ?? '', 'base64url'), JSON.stringify(jwk)]) {
      const input = `${b64url({ alg: 'HS256', typ: 'at+jwt', kid: header.kid })}.${b64url(claims)}`
      const token = `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`
      await refused(t, token, 'HS256 with the public key')
    }
  })

  t.test('expired', async (t) => {
    await refused(t, await signed({ iat: now - 3600, nbf: now - 3600, exp: now - 60 }), 'expired')
  })

  t.test('not yet valid', async (t) => {
    await refused(t, await signed({ nbf: now + 3600, exp: now + 7200 }), 'nbf an hour ahead')
  })

  t.test('wrong iss, wrong aud', async (t) => {
    await refused(t, await signed({ iss: 'https://evil.example' }), 'wrong iss')
    await refused(t, await signed({ aud: 'another-service' }), 'wrong aud')
    const noAud: JWTPayload = { ...claims }
    delete noAud.aud
    const signer = await keyring.signer()
    await refused(
      t,
      await new SignJWT(noAud)
        .setProtectedHeader({ alg: 'EdDSA', kid: signer.kid, typ: 'at+jwt' })
        .sign(signer.privateKey),
      'no aud',
    )
  })

  t.test('unknown kid; a foreign key under our kid', async (t) => {
    const { privateKey } = generateKeyPairSync('ed25519')
    await refused(
      t,
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', kid: 'no-such-kid', typ: 'at+jwt' })
        .sign(privateKey),
      'unknown kid',
    )
    await refused(
      t,
      await new SignJWT(claims)
        .setProtectedHeader({ alg: 'EdDSA', kid: String(header.kid), typ: 'at+jwt' })
        .sign(privateKey),
      'our kid, another key',
    )
    await refused(
      t,
      await new SignJWT(claims).setProtectedHeader({ alg: 'EdDSA', typ: 'at+jwt' }).sign(privateKey),
      'no kid',
    )
  })

  t.test('tampered payload; another typ', async (t) => {
    const [h, , s] = pair.access_token.split('.')
    await refused(t, `${h}.${b64url({ ...claims, roles: ['admin'] })}.${s}`, 'roles changed')
    await refused(t, `${h}.${b64url({ ...claims, exp: now + 86_400 * 365 })}.${s}`, 'exp extended')
    await refused(t, await signed({}, { typ: 'JWT' }), 'typ JWT (an ID token, say)')
    await refused(t, 'not.a.jwt', 'garbage')
  })

  t.test('a session that does not exist, or of another user', async (t) => {
    await refused(t, await signed({ sid: 'ses_forged' }), 'forged sid')
    await refused(t, await signed({ sub: 'usr_000000000000000000000000' }), 'another sub on this session')
  })

  const freshUser = async (username: string): Promise<Pair> => {
    await createUser(gw, { username, password: `${username} password` })
    const p = await login(gw.url, username, `${username} password`)
    t.equal((await me(gw.url, p.access_token)).status, 200, `${username}: the token works first`)
    return p
  }

  t.test("a deleted user's token; the same username made again does not revive it", async (t) => {
    const p = await freshUser('deleted-user')
    t.equal((await call(gw.url, 'DELETE', '/admin/users/deleted-user', { token: gw.adminToken })).status, 200)
    await refused(t, p.access_token, 'deleted user')
    await createUser(gw, { username: 'deleted-user', password: 'deleted-user password' })
    await refused(t, p.access_token, 'deleted user, username made again')
    t.equal(
      (await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })).status,
      401,
      'nor its refresh token',
    )
  })

  t.test("a disabled user's token; enabled again it works", async (t) => {
    const p = await freshUser('disabled-user')
    t.equal(
      (await call(gw.url, 'PATCH', '/admin/users/disabled-user', { token: gw.adminToken, body: { disabled: true } }))
        .status,
      200,
    )
    await refused(t, p.access_token, 'disabled user')
    const again = await call(gw.url, 'POST', '/api/v1/auth/user', {
      body: { username: 'disabled-user', password: 'disabled-user password' },
    })
    t.equal(again.status, 401, 'and it cannot log in')
    await call(gw.url, 'PATCH', '/admin/users/disabled-user', { token: gw.adminToken, body: { disabled: false } })
    t.equal((await me(gw.url, p.access_token)).status, 200)
  })

  t.test('a new password ends the sessions started before it', async (t) => {
    const p = await freshUser('password-user')
    await call(gw.url, 'PATCH', '/admin/users/password-user', {
      token: gw.adminToken,
      body: { password: 'the new password' },
    })
    await refused(t, p.access_token, 'token from before the new password')
  })

  t.test('the token after logout', async (t) => {
    const p = await freshUser('logout-user')
    const out = await call(gw.url, 'POST', '/api/v1/auth/logout', { token: p.access_token })
    t.equal(out.status, 204)
    await refused(t, p.access_token, 'after logout')
    t.equal(
      (await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })).status,
      401,
      'the refresh token is dead too',
    )
    t.equal(
      (await call(gw.url, 'POST', '/api/v1/auth/logout', { token: p.access_token })).status,
      401,
      'a second logout is refused',
    )
  })

  t.test('refresh-token reuse is refused and revokes the whole session', async (t) => {
    const p = await freshUser('reuse-user')
    const first = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })
    t.equal(first.status, 200)
    const spent = first.json as unknown as Pair
    t.not(spent.refresh_token, p.refresh_token, 'a new refresh token on every use')
    // The user refreshes on: the first token's successor is spent, so even within the reuse
    // window (test/jwt/refresh-reuse.test.ts) the first token is no repeat but a theft.
    const second = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: spent.refresh_token } })
    t.equal(second.status, 200)
    const next = second.json as unknown as Pair
    t.equal((await me(gw.url, next.access_token)).status, 200)

    const reuse = await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: p.refresh_token } })
    t.equal(reuse.status, 401)
    t.strictSame(reuse.json, { detail: 'Invalid or expired refresh token' })
    t.equal(reuse.headers.get('www-authenticate'), 'Bearer')
    await refused(t, next.access_token, 'the new access token of the reused session')
    await refused(t, p.access_token, 'the first access token of the reused session')
    t.equal(
      (await call(gw.url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: next.refresh_token } })).status,
      401,
      'the newest refresh token is dead too',
    )
    // Other sessions of the same user are not touched.
    const other = await login(gw.url, 'reuse-user', 'reuse-user password')
    t.equal((await me(gw.url, other.access_token)).status, 200)
  })

  t.test('the refresh and access tokens are stored only as hashes', async (t) => {
    const all = await ns.keys()
    const values: string[] = []
    for (const key of all) {
      const type = await ns.redis.type(key)
      if (type === 'string') values.push(key, String(await ns.redis.get(key)))
      else if (type === 'hash') values.push(key, JSON.stringify(await ns.redis.hgetall(key)))
      else values.push(key)
    }
    const dump = values.join('\n')
    t.notMatch(dump, pair.refresh_token, 'no refresh token')
    t.notMatch(dump, pair.access_token, 'no access token')
    t.notMatch(dump, 'mallory password', 'no password')
    t.notMatch(dump, /PRIVATE KEY|"d":/, 'no private key in the clear')
  })
}
