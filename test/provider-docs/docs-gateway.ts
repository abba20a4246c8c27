// The setting every page of the provider's guides starts from (telekom/aifoundation-docs,
// getting-started/quickstart.mdx steps 2 and 3): a key, and the two environment variables
// OPENAI_API_KEY and OPENAI_BASE_URL, which the official SDK reads when it is built with no
// options (`new OpenAI()`). Here the gateway is the one `npm start` runs (the default
// configuration, the built-in mock behind every model), and the key comes from the admin
// API in place of the provider's portal. Plus what the pages' curl lines send, as fetch.
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

export interface DocsGateway {
  readonly gw: RunningTollgate
  readonly key: string
  /** `$OPENAI_BASE_URL`: the gateway's /v2. */
  readonly base: string
}

/**
 * Starts the gateway (stopped when the file's tests end), creates a key of `tier` and
 * exports the two variables the SDK reads. Standard1000 by default: its plan lists every
 * model the guides call (gpt-4.1, claude-sonnet-4, gemini-2.5-flash, gpt-image-1, ...).
 */
export async function startDocsGateway(tier = 'Standard1000'): Promise<DocsGateway> {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ name: 'provider-docs', tier })
  const base = `${gw.url}/v2`
  process.env.OPENAI_API_KEY = key
  process.env.OPENAI_BASE_URL = base
  return { gw, key, base }
}

/** `curl -X POST url -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" -d body`. */
export function curlJson(url: string, key: string, body: unknown): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

/** `curl url -H "Authorization: Bearer $KEY"`. */
export function curlGet(url: string, key: string): Promise<Response> {
  return fetch(url, { headers: { authorization: `Bearer ${key}` } })
}

/** `curl -X POST url -H "Authorization: Bearer $KEY" -F name=value ... -F "file=@path"`. */
export function curlForm(
  url: string,
  key: string,
  fields: Readonly<Record<string, string>>,
  file: { readonly name: string; readonly data: Buffer },
): Promise<Response> {
  const form = new FormData()
  for (const [name, value] of Object.entries(fields)) form.append(name, value)
  form.append('file', new Blob([file.data]), file.name)
  return fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form })
}

/** The six headers of reference/rate-limits.mdx, "Rate Limit Response Headers". */
export const RATE_LIMIT_HEADERS = [
  'x-ratelimit-limit-requests',
  'x-ratelimit-limit-tokens',
  'x-ratelimit-remaining-requests',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-requests',
  'x-ratelimit-reset-tokens',
] as const

/** A short WAV-sized buffer standing for the pages' "/path/to/audio_file.mp3". */
export const AUDIO = Buffer.alloc(16_000, 1)

/** A 1×1 PNG, for the pages' local images. */
export const PIXEL_PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
)
