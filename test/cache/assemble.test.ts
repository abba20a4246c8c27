// A stored stream assembled into the endpoint's JSON shape: chat (choices in index order,
// content, refusal, tool calls put together, the fingerprint, the usage) and completions;
// a stream that did not end, or whose choice never finished, is not kept.
import t from 'tap'
import { assembled } from '../../src/cache/assemble.ts'

const sse = (...datas: unknown[]): Buffer =>
  Buffer.from(datas.map((d) => `data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`).join(''))
const head = { id: 'chatcmpl-1', created: 7, model: 'm' }

t.test('chat: two choices, tool calls in parts, fingerprint and usage', async (t) => {
  const bytes = sse(
    { ...head, system_fingerprint: 'fp', choices: [{ index: 1, delta: { role: 'assistant', content: 'B' } }] },
    { ...head, choices: [{ index: 0, delta: { content: 'A1' } }] },
    {
      ...head,
      choices: [
        { index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', function: { name: 'get', arguments: '{"a"' } }] } },
      ],
    },
    {
      ...head,
      choices: [
        {
          index: 0,
          delta: { tool_calls: [{ index: 0, function: { arguments: ':1}' } }] },
          finish_reason: 'tool_calls',
        },
      ],
    },
    { ...head, choices: [{ index: 1, delta: {}, finish_reason: 'stop' }] },
    { ...head, choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } },
    '[DONE]',
  )
  t.same(assembled('chat.completions', 'text/event-stream', bytes), {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 7,
    model: 'm',
    system_fingerprint: 'fp',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: 'A1',
          refusal: null,
          tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get', arguments: '{"a":1}' } }],
        },
        logprobs: null,
        finish_reason: 'tool_calls',
      },
      { index: 1, message: { role: 'assistant', content: 'B', refusal: null }, logprobs: null, finish_reason: 'stop' },
    ],
    usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
  })
  const whole = assembled('chat.completions', 'text/event-stream', bytes) ?? {}
  t.same(
    Object.keys(whole),
    ['id', 'object', 'created', 'model', 'system_fingerprint', 'choices', 'usage'],
    'the fields in the order the API writes them',
  )
  const unfinished = sse({ ...head, choices: [{ index: 0, delta: { content: 'x' } }] }, '[DONE]')
  t.equal(assembled('chat.completions', 'text/event-stream', unfinished), undefined, 'a choice never finished')
  const cut = sse({ ...head, choices: [{ index: 0, delta: { content: 'x' }, finish_reason: 'stop' }] })
  t.equal(assembled('chat.completions', 'text/event-stream', cut), undefined, 'no [DONE]')
  const noIndex = sse({ ...head, choices: [{ delta: { content: 'x' }, finish_reason: 'stop' }] }, '[DONE]')
  t.equal(assembled('chat.completions', 'text/event-stream', noIndex), undefined, 'a choice without its index')
})

t.test('completions: text joined per choice, usage kept', async (t) => {
  const h = { id: 'cmpl-1', created: 9, model: 'm' }
  const bytes = sse(
    { ...h, choices: [{ index: 0, text: 'He' }] },
    { ...h, choices: [{ index: 0, text: 'llo', finish_reason: 'length' }] },
    { ...h, choices: [], usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } },
    '[DONE]',
  )
  t.same(assembled('completions', 'text/event-stream; charset=utf-8', bytes), {
    id: 'cmpl-1',
    object: 'text_completion',
    created: 9,
    model: 'm',
    choices: [{ index: 0, text: 'Hello', logprobs: null, finish_reason: 'length' }],
    usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  })
  t.equal(assembled('completions', 'text/event-stream', sse({ ...h, choices: [] }, '[DONE]')), undefined, 'no choices')
})
