// Shared by the mock backend's tests: a stand-in client exchange (the mock never touches
// it), a JSON request to it, and reading a reply as JSON of an expected status.
import { text as readText } from 'node:stream/consumers'
import type { UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import type { Endpoint } from '../../src/config/schema.ts'

export const client = {} as unknown as UpstreamRequest['client']

/** A JSON POST to the mock, as the corridor would send it (the body copied). */
export function post(endpoint: Endpoint, path: string, value: Record<string, unknown>): UpstreamRequest {
  return {
    endpoint,
    method: 'POST',
    path,
    model: 'mock-model',
    requestId: 'req-test',
    body: { kind: 'json', value: structuredClone(value) },
    signal: new AbortController().signal,
    client,
  }
}

export async function json<T>(response: UpstreamResponse, status = 200): Promise<T> {
  const body = await readText(response.body)
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${body}`)
  return JSON.parse(body) as T
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null }
}
