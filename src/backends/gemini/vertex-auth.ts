// Vertex AI's credential: a service account's key (the JSON file Google hands out) exchanged
// for an OAuth access token by the JWT bearer grant (RFC 7523, as Google's "OAuth 2.0 for
// server to server applications" describes it): an assertion signed RS256 with the account's
// private key, posted to its token endpoint. The token is kept and replaced before it
// expires; calls that need one while it is being fetched wait on that one fetch. The key
// and the tokens are never logged, and a token endpoint that refuses or fails is the
// gateway's credential failing (upstream_auth_failed), not the caller's.
import https from 'node:https'
import { gatewayError, type GatewayError } from '../../errors.ts'
import { http } from '../../http/node-http.ts'
import { isJsonObject } from '../../json.ts'
import { loadJose } from '../../jwt/jose.ts'

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform'
const DEFAULT_TOKEN_URL = 'https://oauth2.googleapis.com/token'
/** A token with less than this left is replaced before a call uses it. */
export const REFRESH_MARGIN_MS = 5 * 60_000
/** An assertion's lifetime: Google takes at most an hour. */
const ASSERTION_SECONDS = 3600
const TOKEN_REPLY_BYTES = 64 * 1024

interface ServiceAccount {
  readonly clientEmail: string
  readonly privateKey: string
  readonly privateKeyId: string | undefined
  readonly tokenUri: string | undefined
}

export interface VertexAuth {
  /** The Authorization header for a call, fetching a fresh token when the kept one is (nearly) expired. */
  headers(): Promise<Record<string, string>>
  /** The kept token was refused (revoked before its time): the next call fetches another. */
  forget(): void
}

const refused = (message: string): GatewayError =>
  gatewayError('upstream_auth_failed', { message, headers: { 'x-should-retry': 'false' } })

/** Reads the service account key once, at the adapter's creation; a key that is not one is said at the first call. */
export function createVertexAuth(
  credentialsJson: string | undefined,
  options: { readonly tokenUrl?: string | undefined; readonly timeoutMs: number; readonly now?: () => number },
): VertexAuth {
  const account = serviceAccountOf(credentialsJson)
  const now = options.now ?? Date.now
  let token: { readonly value: string; readonly expiresAt: number } | undefined
  let fetching: Promise<string> | undefined

  async function fetchToken(): Promise<string> {
    if (account === undefined)
      throw refused('The service account key of this Vertex AI backend is missing or is not a service account key.')
    const tokenUrl = options.tokenUrl ?? account.tokenUri ?? DEFAULT_TOKEN_URL
    const jose = await loadJose()
    const key = await jose.importPKCS8(account.privateKey, 'RS256').catch(() => {
      throw refused('The private key of the service account of this Vertex AI backend cannot be read.')
    })
    const issuedAt = Math.floor(now() / 1000)
    const assertion = await new jose.SignJWT({ scope: SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(account.privateKeyId ? { kid: account.privateKeyId } : {}) })
      .setIssuer(account.clientEmail)
      .setAudience(tokenUrl)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ASSERTION_SECONDS)
      .sign(key)
    const form = new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion })
    const reply = await postForm(tokenUrl, form.toString(), options.timeoutMs)
    if (reply.status !== 200 || !isJsonObject(reply.json) || typeof reply.json.access_token !== 'string')
      throw refused(`The token endpoint of this Vertex AI backend refused its service account (${reply.status}).`)
    const expiresIn = typeof reply.json.expires_in === 'number' ? reply.json.expires_in : ASSERTION_SECONDS
    token = { value: reply.json.access_token, expiresAt: now() + expiresIn * 1000 }
    return token.value
  }

  return {
    async headers() {
      if (token !== undefined && token.expiresAt - now() > REFRESH_MARGIN_MS)
        return { authorization: `Bearer ${token.value}` }
      fetching ??= fetchToken().finally(() => {
        fetching = undefined
      })
      return { authorization: `Bearer ${await fetching}` }
    },
    forget() {
      token = undefined
    },
  }
}

function serviceAccountOf(json: string | undefined): ServiceAccount | undefined {
  if (json === undefined) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return undefined
  }
  if (!isJsonObject(parsed) || typeof parsed.client_email !== 'string' || typeof parsed.private_key !== 'string')
    return undefined
  return {
    clientEmail: parsed.client_email,
    privateKey: parsed.private_key,
    privateKeyId: typeof parsed.private_key_id === 'string' ? parsed.private_key_id : undefined,
    tokenUri: typeof parsed.token_uri === 'string' ? parsed.token_uri : undefined,
  }
}

function postForm(url: string, body: string, timeoutMs: number): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const target = new URL(url)
    const req = (target.protocol === 'https:' ? https : http).request(target, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
      timeout: timeoutMs,
    })
    req.once('timeout', () => req.destroy(new Error('timed out')))
    req.once('error', () => reject(refused('The token endpoint of this Vertex AI backend could not be reached.')))
    req.once('response', (res) => {
      const chunks: Buffer[] = []
      let size = 0
      res.on('data', (chunk: Buffer) => {
        size += chunk.length
        if (size > TOKEN_REPLY_BYTES) res.destroy()
        else chunks.push(chunk)
      })
      res.once('error', () => reject(refused('The token endpoint of this Vertex AI backend broke off its answer.')))
      res.once('end', () => {
        let json: unknown
        try {
          json = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, json })
      })
    })
    req.end(body)
  })
}
