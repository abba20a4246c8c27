// SigV4 for Bedrock Runtime, by AWS's own signer (@smithy/signature-v4, the one every AWS SDK
// for JavaScript signs with): the signing name is `bedrock`, the region the backend's. The
// credentials are the ones read at start from the standard AWS environment variables (or
// those the backend names); a session token, when there is one, goes as x-amz-security-token.
import { Hash } from '@smithy/core/serde'
import { SignatureV4 } from '@smithy/signature-v4'

export interface AwsCredentials {
  readonly accessKeyId: string
  readonly secretAccessKey: string
  readonly sessionToken?: string
}

export interface Signer {
  /** The headers to send for a POST of `body` to `url`: `headers` plus host, x-amz-date, x-amz-content-sha256, authorization. */
  sign(url: URL, headers: Readonly<Record<string, string>>, body: Buffer): Promise<Record<string, string>>
}

export const SIGNING_NAME = 'bedrock'

/** A signer for `region`, or one that signs nothing when there are no credentials (Bedrock then refuses: upstream_auth_failed). */
export function createSigner(region: string, credentials: AwsCredentials | undefined): Signer {
  if (credentials === undefined) return { sign: (url, headers) => Promise.resolve({ ...headers, host: url.host }) }
  const signer = new SignatureV4({
    service: SIGNING_NAME,
    region,
    credentials,
    sha256: Hash.bind(null, 'sha256'),
  })
  return {
    async sign(url, headers, body) {
      const signed = await signer.sign({
        method: 'POST',
        protocol: url.protocol,
        hostname: url.hostname,
        ...(url.port === '' ? {} : { port: Number(url.port) }),
        path: url.pathname,
        query: {},
        headers: { ...headers, host: url.host },
        body,
      })
      return signed.headers
    },
  }
}
