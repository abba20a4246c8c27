// What an upstream may learn from the client's request headers. http-proxy-3 copies
// every client header onto the outgoing request; this is where the client's
// credentials, cookies and the gateway's own x-tollgate-* headers are taken off again,
// and the framing headers are replaced by ones that match the body we actually send.
import type { ClientRequest } from 'node:http'

const DROPPED = new Set([
  // The client's credentials are for the gateway; the upstream gets the gateway's key.
  'authorization',
  'proxy-authorization',
  'x-api-key',
  'api-key',
  'cookie',
  // The client's OpenAI account headers would contradict the gateway's key upstream.
  'openai-organization',
  'openai-project',
  // A caller speaking Anthropic's API names its version and betas; an OpenAI-compatible
  // upstream is sent a chat completion, which they say nothing about.
  'anthropic-version',
  'anthropic-beta',
  // Framing: the body sent upstream is re-serialised, so its length and type are ours.
  'content-length',
  'transfer-encoding',
  'content-type',
  'expect',
  // Hop-by-hop: they describe the client's connection, not ours.
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  // The usage tap must read the body, so the upstream is asked for identity below.
  'accept-encoding',
  // Set from the gateway's own request id; the client's claims about its address are
  // unverified and would only mislead the upstream's logs.
  'x-request-id',
  'forwarded',
  'x-real-ip',
])

function isDropped(name: string): boolean {
  return DROPPED.has(name) || name.startsWith('x-tollgate-') || name.startsWith('x-forwarded-')
}

/** Takes the client's headers off `proxyReq` and sets `ours` in their place. */
export function rewriteOutgoingHeaders(proxyReq: ClientRequest, ours: Readonly<Record<string, string>>): void {
  for (const name of proxyReq.getHeaderNames()) {
    if (isDropped(name)) proxyReq.removeHeader(name)
  }
  for (const [name, value] of Object.entries(ours)) proxyReq.setHeader(name, value)
}

/**
 * How the gateway's key is presented. Azure OpenAI takes API keys in an api-key header
 * (a Bearer token there means an Entra ID token); everyone else takes Bearer.
 */
export function credentialHeaders(hostname: string, apiKey: string | undefined): Record<string, string> {
  if (apiKey === undefined) return {}
  if (/\.(openai|cognitiveservices)\.azure\.com$/i.test(hostname)) return { 'api-key': apiKey }
  return { authorization: `Bearer ${apiKey}` }
}
