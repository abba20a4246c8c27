// A stored Messages request's result as its caller reads it (queued-result.ts): the chat
// reply the worker kept, in Anthropic's shape. A message, a stream's events, an error at
// Anthropic's status, and a success no Messages caller could read (the upstream's fault).
import t from 'tap'
import { NO_USAGE } from '../../src/backends/port.ts'
import { anthropicResultOf } from '../../src/protocols/anthropic/queued-result.ts'
import type { StoredResult } from '../../src/queue/ports.ts'
import { requestView } from '../../src/queue/view.ts'

const completion = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  model: 'claude-sonnet-4.5',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 },
}
const json = (statusCode: number, body: unknown): StoredResult => ({
  statusCode,
  contentType: 'application/json',
  encoding: 'json',
  body,
  usage: NO_USAGE,
})

t.test('a chat completion is shown as the Message', async (t) => {
  const shown = anthropicResultOf(json(200, completion), 'qreq_1')
  t.equal(shown.statusCode, 200)
  t.match(shown.body, {
    type: 'message',
    role: 'assistant',
    model: 'claude-sonnet-4.5',
    content: [{ type: 'text', text: 'Hello.' }],
    stop_reason: 'end_turn',
    usage: { input_tokens: 7, output_tokens: 2 },
  })
})

t.test("a recorded chat stream is shown as Anthropic's events", async (t) => {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: 'c', model: 'claude-sonnet-4.5', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
  const sse =
    chunk({ role: 'assistant', content: 'Hel' }) +
    chunk({ content: 'lo' }) +
    chunk({}, 'length') +
    `data: ${JSON.stringify({ id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } })}\n\n` +
    'data: [DONE]\n\n'
  const shown = anthropicResultOf(
    { statusCode: 200, contentType: 'text/event-stream; charset=utf-8', encoding: 'text', body: sse, usage: NO_USAGE },
    'qreq_2',
  )
  const text = String(shown.body)
  const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])
  t.same(events, [
    'message_start',
    'ping',
    'content_block_start',
    'content_block_delta',
    'content_block_delta',
    'content_block_stop',
    'message_delta',
    'message_stop',
  ])
  t.match(text, /"stop_reason":"max_tokens"/)
  t.match(text, /"output_tokens":2/)
  t.notMatch(text, /\[DONE\]/)
})

t.test('an error is shown as Anthropic error at its status', async (t) => {
  const openai = { error: { message: 'Bad thing.', type: 'invalid_request_error', param: null, code: null } }
  t.match(anthropicResultOf(json(400, openai), 'qreq_3'), {
    statusCode: 400,
    body: { type: 'error', error: { type: 'invalid_request_error', message: 'Bad thing.' }, request_id: 'qreq_3' },
  })
  t.match(anthropicResultOf(json(503, { detail: 'Busy.' }), 'qreq_4'), {
    statusCode: 529,
    body: { type: 'error', error: { type: 'overloaded_error', message: 'Busy.' } },
  })
  t.match(anthropicResultOf(json(429, openai), 'qreq_5'), {
    statusCode: 429,
    body: { error: { type: 'rate_limit_error' } },
  })
})

t.test('a success no Messages caller can read is the upstream fault', async (t) => {
  const shown = anthropicResultOf(
    { statusCode: 200, contentType: 'application/octet-stream', encoding: 'base64', body: 'AAAA', usage: NO_USAGE },
    'qreq_6',
  )
  t.match(shown, { statusCode: 502, encoding: 'json', body: { type: 'error', error: { type: 'api_error' } } })
})

t.test("the stored request's view: Anthropic's endpoint and result for an Anthropic caller only", async (t) => {
  const request = {
    id: 'qreq_7',
    keyId: 'key_1',
    owner: 'o',
    tier: 'Standard4000',
    line: 'key_1:claude-sonnet-4.5',
    createdAt: 1_000_000,
    status: 'completed' as const,
    attempts: 1,
    startedAt: 1_000_100,
    finishedAt: 1_000_200,
    cancelRequested: false,
    result: json(200, completion),
    runner: null,
  }
  const call = {
    endpoint: 'chat.completions' as const,
    model: 'claude-sonnet-4.5',
    params: {},
    query: '',
    estimate: { inputTokens: 1, outputTokens: 1, sentCap: undefined },
  } as unknown as Parameters<typeof requestView>[0]['call']
  const options = { now: 1_000_300, ttlMs: 60_000 }
  const asOpenAI = requestView({ ...request, call }, options)
  t.equal(asOpenAI.endpoint, '/chat/completions')
  t.match(asOpenAI.response, { status_code: 200, body: { object: 'chat.completion' } })
  const asAnthropic = requestView({ ...request, call: { ...call, protocol: 'anthropic' } }, options)
  t.equal(asAnthropic.endpoint, '/v1/messages')
  t.match(asAnthropic.response, { status_code: 200, body: { type: 'message', content: [{ text: 'Hello.' }] } })
})
