import t from 'tap'
import { SseParser } from '../../src/proxy/sse.ts'
import { readEvent } from '../../src/proxy/usage-tap.ts'

t.test('a CR at the end of a chunk waits to see whether an LF follows', async (t) => {
  const parser = new SseParser()
  t.same(parser.push(Buffer.from('data: a\r')), [])
  t.same(parser.push(Buffer.from('\n\r')), [])
  const events = parser.push(Buffer.from('\ndata: b\n\n'))
  t.same(
    events.map((e) => [e.data, e.raw]),
    [
      ['a', 'data: a\r\n\r\n'],
      ['b', 'data: b\n\n'],
    ],
  )
})

t.test('a UTF-8 character split across chunks arrives whole', async (t) => {
  const bytes = Buffer.from('data: 👋🏽 é\n\n')
  const parser = new SseParser()
  const events = [...bytes].flatMap((byte) => parser.push(Buffer.from([byte])))
  t.same(
    events.map((e) => e.data),
    ['👋🏽 é'],
  )
})

t.test('fields: event, multi-line data, no space after the colon, comments, unknown fields', async (t) => {
  const parser = new SseParser()
  const events = parser.push(
    Buffer.from('id: 1\nevent: delta\ndata:one\ndata:  two\n: note\nretry: 5\n\n: only a comment\n\n'),
  )
  t.equal(events.length, 2)
  t.equal(events[0]?.event, 'delta')
  t.equal(events[0]?.data, 'one\n two')
  t.equal(events[1]?.data, undefined)
  t.equal(events[1]?.raw, ': only a comment\n\n')
})

t.test('the end of input delivers an event that lacked its blank line, bytes intact', async (t) => {
  const parser = new SseParser()
  t.same(parser.push(Buffer.from('data: [DONE]')), [])
  const events = parser.end()
  t.same(
    events.map((e) => [e.data, e.raw]),
    [['[DONE]', 'data: [DONE]']],
  )
  t.same(parser.end(), [])
})

t.test('however the bytes are split, the events are those of reading them line by line', async (t) => {
  // One byte at a time the parser always goes line by line; larger pieces take the usual
  // one-line data events whole (push's shortcut), and must come out the same, bytes and all.
  const stream =
    'data: {"a":1}\n\ndata:{"b":2}\n\nevent: delta\ndata: c\n\ndata: d\r\n\r\n: note\n\n' +
    'data: e\ndata: f\n\ndata: g\rdata: h\n\ndata: 👋🏽\n\ndata\n\ndata: [DONE]\n\n'
  const bytes = Buffer.from(stream)
  const read = (pieces: Buffer[]): Array<[string, string | undefined, string | undefined]> => {
    const parser = new SseParser()
    return [...pieces.flatMap((piece) => parser.push(piece)), ...parser.end()].map((e) => [e.raw, e.event, e.data])
  }
  const expected = read([...bytes].map((byte) => Buffer.from([byte])))
  t.equal(expected.length, 10)
  t.same(read([bytes]), expected, 'whole')
  for (let size = 2; size <= 24; size++) {
    const pieces: Buffer[] = []
    for (let at = 0; at < bytes.length; at += size) pieces.push(bytes.subarray(at, at + size))
    t.same(read(pieces), expected, `in pieces of ${size} bytes`)
  }
})

t.test('readEvent: what counts as generated text and what is usage', async (t) => {
  t.same(
    readEvent({
      choices: [
        { delta: { content: 'a', reasoning_content: 'b', tool_calls: [{ function: { arguments: '{"x":1}' } }] } },
      ],
    }).text,
    'ab{"x":1}',
  )
  t.equal(readEvent({ choices: [{ text: 'legacy' }] }).text, 'legacy')
  t.equal(readEvent({ type: 'response.output_text.delta', delta: 'hi' }).text, 'hi')
  t.equal(readEvent({ type: 'response.function_call_arguments.delta', delta: '{"a"' }).text, '{"a"')
  t.equal(readEvent({ type: 'response.audio.delta', delta: 'AAAAbase64' }).text, '', 'audio is not text')
  t.same(readEvent({ choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } }), {
    usage: { inputTokens: 1, outputTokens: 2 },
    usageOnly: true,
    text: '',
    error: false,
  })
  t.equal(readEvent({ error: { message: 'overloaded', type: 'server_error' } }).error, true, 'an error event')
  t.equal(
    readEvent({ choices: [{ delta: { content: 'x' } }], usage: { prompt_tokens: 1, completion_tokens: 1 } }).usageOnly,
    false,
    'a chunk with content is never dropped',
  )
  t.equal(readEvent({ choices: [{ delta: { content: 'x' } }], usage: null }).usage, undefined)
  t.same(readEvent({ type: 'response.completed', response: { usage: { input_tokens: 3, output_tokens: 4 } } }).usage, {
    inputTokens: 3,
    outputTokens: 4,
  })
  t.equal(
    readEvent({ usage: { type: 'duration', seconds: 3 } }).usage,
    undefined,
    'whisper reports seconds, not tokens',
  )
  t.equal(readEvent('not an object').text, '')
})
