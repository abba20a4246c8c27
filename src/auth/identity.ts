// Who a RAG-gateway request is: the contract between the token side (accounts, login,
// JWTs, an external OIDC issuer) and the routing side (/<service>/<route>), which only
// ever sees a verified Identity.

/** A user the gateway has verified, from its own access token or an OIDC issuer's. */
export interface Identity {
  readonly userId: string
  readonly username: string
  readonly roles: readonly string[]
  readonly groups: readonly string[]
  readonly tenant: string
  /** The verified access token, forwarded to backends only when configured to. */
  readonly token: string
  /** Which issuer vouched for it. */
  readonly source: 'local' | 'oidc'
}

/**
 * Verifies a bearer access token. Resolves the identity, or rejects with a GatewayError
 * of status 401 (bad, expired, revoked, unknown kid, deleted or disabled user); the reason
 * is for the log, the client sees one message.
 */
export interface AccessTokenVerifier {
  verify(token: string): Promise<Identity>
}
