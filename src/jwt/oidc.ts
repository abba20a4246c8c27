// Access tokens of an external OpenID Connect issuer (Keycloak, Entra ID, ...): verified
// against its JWKS with jose's remote key set (cached; a token with an unknown kid makes it
// fetch the set again, at most once per cooldown), its issuer and audience checked, and its
// claims mapped to an Identity by the configured claim names.
import { createRemoteJWKSet, jwtVerify, type JWTPayload } from 'jose'
import type { Config } from '../config/schema.ts'
import type { Identity } from '../auth/identity.ts'

export type OidcConfig = NonNullable<Config['ragAuth']['oidc']>

/** A claim by its name, or else by a dotted path into nested objects (`realm_access.roles`). */
export function claimAt(payload: JWTPayload, path: string): unknown {
  if (Object.hasOwn(payload, path)) return payload[path]
  let value: unknown = payload
  for (const part of path.split('.')) {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, part))
      return undefined
    value = (value as Record<string, unknown>)[part]
  }
  return value
}

/** A list claim: an array of strings, or one string of names separated by spaces or commas. */
function names(value: unknown): string[] {
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string')
  if (typeof value === 'string') return value.split(/[\s,]+/).filter((v) => v !== '')
  return []
}

export function createOidcVerifier(config: OidcConfig): (token: string) => Promise<Identity> {
  const jwks = createRemoteJWKSet(new URL(config.jwksUrl), {
    cooldownDuration: config.jwksCooldownMs,
    cacheMaxAge: config.jwksCacheMaxAgeMs,
    timeoutDuration: 5000,
  })
  return async (token) => {
    const { payload } = await jwtVerify(token, jwks, {
      issuer: config.issuer,
      audience: config.audience,
      algorithms: config.algorithms,
      requiredClaims: ['exp'],
    })
    const userId = claimAt(payload, config.claims.userId)
    if (typeof userId !== 'string' || userId === '') throw new Error(`the token has no ${config.claims.userId} claim`)
    const username = claimAt(payload, config.claims.username)
    const tenant = claimAt(payload, config.claims.tenant)
    return {
      userId,
      username: typeof username === 'string' && username !== '' ? username : userId,
      roles: names(claimAt(payload, config.claims.roles)),
      groups: names(claimAt(payload, config.claims.groups)),
      tenant: typeof tenant === 'string' && tenant !== '' ? tenant : config.defaultTenant,
      token,
      source: 'oidc',
    }
  }
}
