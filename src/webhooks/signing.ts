// Webhook signatures in the Standard Webhooks format (standardwebhooks.com): the secret is
// `whsec_` + base64 of random bytes; each delivery carries webhook-id (the event's id: the
// same on every retry, what a receiver dedupes on), webhook-timestamp (unix seconds: a
// receiver refuses one too far from its clock, so a captured delivery cannot be replayed
// later) and webhook-signature `v1,<base64 of HMAC-SHA256(secret bytes, "id.timestamp.body")>`.
import { createHmac, randomBytes } from 'node:crypto'

export const SECRET_PREFIX = 'whsec_'

/** A new endpoint secret: 32 random bytes. */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64')
}

/** The value of webhook-signature for one delivery. */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretBytes(secret)).update(`${id}.${timestampSeconds}.${body}`).digest('base64')
  return `v1,${mac}`
}

/** The headers of a signed delivery. */
export function signedHeaders(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': sign(secret, id, timestampSeconds, body),
  }
}
