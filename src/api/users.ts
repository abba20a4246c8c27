// The RAG gateway's accounts and tokens as the reference shows them. Requests are validated
// by the schemas beside the code (accounts/service.ts, jwt/routes.ts).
import { z } from 'zod'

export const User = z
  .object({
    object: z.literal('user'),
    id: z.string().meta({ description: "Stable id (`usr_…`), the `sub` of the user's access tokens." }),
    username: z.string(),
    roles: z.array(z.string()),
    groups: z.array(z.string()),
    tenant: z.string(),
    disabled: z.boolean().meta({ description: 'A disabled user cannot log in, and its tokens are refused.' }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ description: 'A RAG gateway account. Never its password or its hash.' })

export const UserList = z.object({ object: z.literal('list'), data: z.array(User) })

export const TokenPair = z.object({
  access_token: z.string().meta({ description: 'A JWT (EdDSA) to send as `Authorization: Bearer …`.' }),
  token_type: z.literal('bearer'),
  expires_in: z.number().int().meta({ description: 'Seconds the access token is valid for.' }),
  refresh_token: z
    .string()
    .meta({ description: 'Good for one POST /api/v1/auth/refresh; using it twice ends the session.' }),
})

export const Me = z.object({
  user_id: z.string(),
  username: z.string(),
  roles: z.array(z.string()),
  groups: z.array(z.string()),
  tenant: z.string(),
  source: z.enum(['local', 'oidc']),
})

export const Jwks = z.object({
  keys: z.array(
    z.object({ kty: z.string(), crv: z.string(), x: z.string(), kid: z.string(), alg: z.string(), use: z.string() }),
  ),
})
