// An external OpenID Connect issuer, served on loopback: a tiny HTTP server publishing a
// JWKS, tokens minted with jose. Its tokens are verified (issuer, audience, signature),
// mapped to an Identity by the configured claims, and a token with a kid the gateway has
// not seen makes it fetch the key set again.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { Test } from 'tap'
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type CryptoKey } from 'jose'
import { GatewayError } from '../../src/errors.ts'
import { openEmbeddedStores } from '../../src/store/embedded.ts'
import type { OidcConfig } from '../../src/jwt/oidc.ts'
import { createAccessTokenVerifier } from '../../src/jwt/verifier.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { me } from './helpers.ts'

interface IssuerKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly jwk: JWK
}

async function issuerKey(kid: string): Promise<IssuerKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true })
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' } }
}

// The issuer: publishes `published` at /certs and counts the fetches.
const published: IssuerKey[] = [await issuerKey('kid-1')]
let fetches = 0
const server = createServer((req, res) => {
  if (req.url !== '/realms/test/certs') {
    res.statusCode = 404
    res.end()
    return
  }
  fetches++
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify({ keys: published.map((k) => k.jwk) }))
})
await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
t.teardown(() => new Promise<void>((done) => server.close(() => done())))
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/realms/test`

const oidc: OidcConfig = {
  issuer: base,
  audience: 'rag-gateway',
  jwksUrl: `${base}/certs`,
  algorithms: ['RS256', 'ES256', 'EdDSA'],
  jwksCooldownMs: 0,
  jwksCacheMaxAgeMs: 600_000,
  claims: {
    userId: 'sub',
    username: 'preferred_username',
    roles: 'realm_access.roles',
    groups: 'groups',
    tenant: 'org',
  },
  defaultTenant: 'public',
}

const now = Math.floor(Date.now() / 1000)
const keycloakClaims: JWTPayload = {
  iss: base,
  aud: ['rag-gateway', 'account'],
  sub: 'f3c1a2b4-0000-4000-8000-000000000001',
  iat: now,
  exp: now + 300,
  preferred_username: 'kc-user',
  realm_access: { roles: ['admin', 'user'] },
  groups: ['/team-a'],
  org: 'acme',
}

const mint = (key: IssuerKey, claims: JWTPayload = {}, kid = key.kid): Promise<string> =>
  new SignJWT({ ...keycloakClaims, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid, typ: 'JWT' })
    .sign(key.privateKey)

const stores = openEmbeddedStores(':memory:')
t.teardown(() => stores.close())
const verifier = createAccessTokenVerifier({
  config: { issuer: 'tollgate', audience: 'tollgate-rag', revocationCacheMs: 0, oidc },
  keyring: { publicKey: async () => null },
  sessions: stores.sessions,
  accounts: stores.accounts,
})

const refused = async (t: Test, token: string, what: string): Promise<void> => {
  const error = await verifier.verify(token).then(
    () => null,
    (e: unknown) => e,
  )
  t.ok(error instanceof GatewayError && error.status === 401, `${what}: 401`)
}

t.test('a Keycloak-shaped token is verified and mapped by the configured claims', async (t) => {
  const key = published[0] as IssuerKey
  const token = await mint(key)
  const identity = await verifier.verify(token)
  t.strictSame(identity, {
    userId: 'f3c1a2b4-0000-4000-8000-000000000001',
    username: 'kc-user',
    roles: ['admin', 'user'],
    groups: ['/team-a'],
    tenant: 'acme',
    token,
    source: 'oidc',
  })
  t.equal(fetches, 1, 'the key set was fetched once')
  await verifier.verify(await mint(key, { sub: 'other' }))
  t.equal(fetches, 1, 'and then served from the cache')

  const sparse = await verifier.verify(
    await mint(key, { preferred_username: undefined, realm_access: undefined, groups: 'g1 g2', org: undefined }),
  )
  t.match(
    sparse,
    { username: keycloakClaims.sub, roles: [], groups: ['g1', 'g2'], tenant: 'public' },
    'defaults when claims are missing',
  )
})

t.test('refused: wrong audience, wrong issuer, expired, no subject, another key, HS256', async (t) => {
  const key = published[0] as IssuerKey
  await refused(t, await mint(key, { aud: 'some-other-client' }), 'wrong aud')
  await refused(t, await mint(key, { iss: 'http://127.0.0.1:1/realms/evil' }), 'unconfigured issuer')
  await refused(t, await mint(key, { iat: now - 600, exp: now - 300 }), 'expired')
  await refused(t, await mint(key, { sub: undefined }), 'no user id claim')
  const stranger = await issuerKey('kid-1')
  await refused(t, await mint(stranger), 'signed by a key the issuer does not publish, under its kid')
  const hs = await new SignJWT(keycloakClaims)
    .setProtectedHeader({ alg: 'HS256', kid: 'kid-1' })
    .sign(new TextEncoder().encode(JSON.stringify(key.jwk)))
  await refused(t, hs, 'HS256 with the public key')
})

t.test('an unknown kid makes the key set be fetched again', async (t) => {
  const rotated = await issuerKey('kid-2')
  const before = fetches
  await refused(t, await mint(rotated), 'kid-2 before the issuer publishes it')
  t.ok(fetches > before, 'it was looked for')
  published.push(rotated)
  const fetched = fetches
  const identity = await verifier.verify(await mint(rotated))
  t.equal(identity.username, 'kc-user', 'kid-2 is accepted once published')
  t.equal(fetches, fetched + 1, 'after one more fetch')
  await verifier.verify(await mint(published[0] as IssuerKey))
  t.equal(fetches, fetched + 1, 'kid-1 still from the cache')
})

t.test("through a running gateway: GET /api/v1/auth/me accepts the issuer's token", async (t) => {
  const gw = await startTollgate({
    config: (doc) => {
      doc.ragAuth = { oidc }
    },
  })
  t.teardown(async () => {
    await gw.stop()
  })
  const token = await mint(published[0] as IssuerKey)
  const reply = await me(gw.url, token)
  t.equal(reply.status, 200)
  t.strictSame(reply.json, {
    user_id: keycloakClaims.sub,
    username: 'kc-user',
    roles: ['admin', 'user'],
    groups: ['/team-a'],
    tenant: 'acme',
    source: 'oidc',
  })
  const bad = await me(gw.url, await mint(published[0] as IssuerKey, { aud: 'nope' }))
  t.equal(bad.status, 401)
  t.strictSame(bad.json, { detail: 'Could not validate credentials' })
  // Its own logins still work beside it.
  t.equal((await me(gw.url, 'eyJhbGciOiJub25lIn0.e30.')).status, 401)
})
