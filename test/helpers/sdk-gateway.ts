// How the SDK tests begin: a gateway on its default configuration with a key on it,
// stopped when the file's tests end, and the official openai client that holds the key.
// Written once so that each test file keeps only what it asks of the gateway.
import OpenAI from 'openai'
import type { Test } from 'tap'
import { startTollgate, type RunningTollgate } from './gateway.ts'

/** The openai client with `key`, on the gateway's /v2 API (or /v1), with no retries to hide a failure. */
export function sdkClient(gw: RunningTollgate, key: string, api: 'v1' | 'v2' = 'v2'): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${gw.url}/${api}`, maxRetries: 0 })
}

/** The openai client on /v2 with a fresh Standard4000 key of its own. */
export async function freshKeyClient(gw: RunningTollgate): Promise<OpenAI> {
  return sdkClient(gw, (await gw.createKey({ tier: 'Standard4000' })).key)
}

/** A gateway on the default configuration, stopped when `t` ends, and a Standard4000 key created with `body`. */
export async function startKeyedGateway(
  t: Test,
  body: Record<string, unknown>,
): Promise<{ gw: RunningTollgate; key: string }> {
  const gw = await startTollgate()
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({ tier: 'Standard4000', ...body })
  return { gw, key }
}
