// Shared by the mock backend's tests: a stand-in client exchange (the mock never touches
// it) and reading a reply as JSON of an expected status.
import { text as readText } from 'node:stream/consumers'
import type { UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'

export const client = {} as unknown as UpstreamRequest['client']

export async function json<T>(response: UpstreamResponse, status = 200): Promise<T> {
  const body = await readText(response.body)
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${body}`)
  return JSON.parse(body) as T
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null }
}
