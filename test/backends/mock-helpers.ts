// Shared by the mock backend's tests: the mock they run (fast, short replies, closed when
// the test ends), a stand-in client exchange (the mock never touches it), a JSON request to
// it, and reading a reply as JSON of an expected status or as the frames of a stream.
import type { Test } from 'tap'
import { text as readText } from 'node:stream/consumers'
import type { BackendAdapter, UpstreamRequest, UpstreamResponse } from '../../src/backends/port.ts'
import type { Endpoint, MockBackendConfig } from '../../src/config/schema.ts'
import { createMockBackend } from '../../src/backends/mock/index.ts'

export const MOCK_CONFIG: MockBackendConfig = {
  type: 'mock',
  tokensPerSecond: 1000,
  defaultCompletionTokens: 24,
  fineTuneStepMs: 10,
}

/** A mock backend on MOCK_CONFIG, closed when `t` ends. */
export function mockBackend(t: Test): BackendAdapter {
  const backend = createMockBackend('mock', MOCK_CONFIG)
  t.teardown(() => backend.close())
  return backend
}

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

/** The JSON payloads of a stream's `data:` frames, with [DONE] as the string "[DONE]". */
export async function dataEvents(response: UpstreamResponse): Promise<unknown[]> {
  const raw = await readText(response.body)
  return raw
    .split('\n\n')
    .filter((frame) => frame !== '')
    .map((frame) => {
      const data =
        frame
          .split('\n')
          .find((line) => line.startsWith('data: '))
          ?.slice(6) ?? ''
      return data === '[DONE]' ? data : (JSON.parse(data) as unknown)
    })
}
