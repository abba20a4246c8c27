// A real access-token verifier for the RAG gateway's tests, standing in for the token side:
// Ed25519 keys from jose, tokens signed with SignJWT, checked with jwtVerify (issuer,
// audience, algorithm, expiry), claims mapped to an Identity.
import { generateKeyPair, jwtVerify, SignJWT } from 'jose'
import type { AccessTokenVerifier, Identity } from '../../src/auth/identity.ts'
import { GatewayError } from '../../src/errors.ts'

const ISSUER = 'tollgate-test'
const AUDIENCE = 'tollgate-rag'

export interface TokenClaims {
  readonly sub: string
  readonly name?: string
  readonly roles?: readonly string[]
  readonly groups?: readonly string[]
  readonly tenant?: string
  /** Seconds from now; negative: already expired. Default 300. */
  readonly expiresIn?: number
}

export interface TestTokens {
  readonly verifier: AccessTokenVerifier
  sign(claims: TokenClaims): Promise<string>
}

const strings = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []

export async function createTestTokens(): Promise<TestTokens> {
  const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' })
  return {
    async sign(claims) {
      const now = Math.floor(Date.now() / 1000)
      return new SignJWT({
        name: claims.name ?? claims.sub,
        roles: claims.roles ?? [],
        groups: claims.groups ?? [],
        tenant: claims.tenant ?? 'default',
      })
        .setProtectedHeader({ alg: 'EdDSA', kid: 'test-key' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE)
        .setSubject(claims.sub)
        .setIssuedAt(now)
        .setExpirationTime(now + (claims.expiresIn ?? 300))
        .setJti(`${claims.sub}-${now}-${Math.random().toString(36).slice(2)}`)
        .sign(privateKey)
    },
    verifier: {
      async verify(token): Promise<Identity> {
        try {
          const { payload } = await jwtVerify(token, publicKey, {
            issuer: ISSUER,
            audience: AUDIENCE,
            algorithms: ['EdDSA'],
          })
          if (typeof payload.sub !== 'string') throw new Error('no sub')
          return {
            userId: payload.sub,
            username: typeof payload.name === 'string' ? payload.name : payload.sub,
            roles: strings(payload.roles),
            groups: strings(payload.groups),
            tenant: typeof payload.tenant === 'string' ? payload.tenant : 'default',
            token,
            source: 'local',
          }
        } catch (err) {
          throw new GatewayError('invalid_api_key', { message: 'Invalid access token.', cause: err })
        }
      },
    },
  }
}
