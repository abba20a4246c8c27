// A JSON reply's usage and model read from its ends (src/proxy/reply-scan.ts): whenever
// the scan answers, it says what parsing the whole reply says; a usage or model that is
// not the reply's own (deeper in, or a name twice) is never taken for it.
import fc from 'fast-check'
import t from 'tap'
import { scanReply, TailWindow, usageInTail, SCAN_WINDOW_BYTES } from '../../src/proxy/reply-scan.ts'
import { bodyUsage } from '../../src/proxy/usage-tap.ts'

const bytes = (value: unknown, indent = 0): Buffer => Buffer.from(JSON.stringify(value, null, indent), 'utf8')
const USAGE = { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 }

t.test('a chat reply: model from the start, usage from the end', async (t) => {
  const reply = {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'm-1',
    choices: [{ index: 0, message: { role: 'assistant', content: 'say "usage": {} and "model"' } }],
    usage: USAGE,
  }
  t.same(scanReply(bytes(reply)), { usage: { inputTokens: 11, outputTokens: 5 }, model: 'm-1' })
  t.same(scanReply(bytes(reply, 2)), { usage: { inputTokens: 11, outputTokens: 5 }, model: 'm-1' }, 'indented')
})

t.test('an embeddings reply: both from the end, past a body larger than the window', async (t) => {
  const data = Array.from({ length: 40 }, (_, i) => ({
    object: 'embedding',
    index: i,
    embedding: new Array(400).fill(0.125),
  }))
  const reply = bytes({ object: 'list', data, model: 'emb', usage: { prompt_tokens: 7, total_tokens: 7 } })
  t.ok(reply.length > 4 * SCAN_WINDOW_BYTES)
  t.same(scanReply(reply), { usage: { inputTokens: 7, outputTokens: 0 }, model: 'emb' })
})

t.test('what is not the reply’s own is not taken for it', async (t) => {
  t.equal(scanReply(bytes({ model: 'm', choices: [{ usage: USAGE }] })), undefined, 'usage deeper in')
  t.equal(scanReply(bytes({ model: 'm', usage: null })), undefined, 'usage null')
  t.equal(scanReply(bytes({ choices: [{ model: 'inner' }], usage: USAGE })), undefined, 'a model deeper in only')
  t.same(
    scanReply(bytes({ usage: USAGE })),
    { usage: { inputTokens: 11, outputTokens: 5 }, model: null },
    'no model at all',
  )
  const twice = Buffer.from('{"model":"first","x":1,"model":"second","usage":{"prompt_tokens":1}}')
  t.equal(scanReply(twice)?.model, 'second', 'of two, the last (as JSON.parse has it)')
  t.equal(
    scanReply(bytes({ object: 'response', model: 'm', usage: USAGE })),
    undefined,
    'a responses reply is parsed whole',
  )
  t.equal(scanReply(Buffer.from('[{"usage":{"prompt_tokens":1}}]')), undefined, 'not an object')
  t.equal(scanReply(Buffer.from('{"model":"m","usage":{"prompt_tokens":1}')), undefined, 'cut short')
})

t.test('whenever the scan answers, it agrees with parsing the whole reply', async (t) => {
  const usage = fc.record({ prompt_tokens: fc.nat(1e6), completion_tokens: fc.nat(1e6) })
  const names = fc.constantFrom('model', 'usage', 'id', 'choices', 'data')
  const member = fc.oneof(fc.jsonValue({ maxDepth: 3 }), usage, fc.dictionary(names, fc.jsonValue({ maxDepth: 2 })))
  const reply = fc.dictionary(names, member, { maxKeys: 5 })
  let answered = 0
  fc.assert(
    fc.property(reply, fc.integer({ min: 0, max: 2 }), (value, indent) => {
      const scanned = scanReply(bytes(value, indent))
      if (scanned === undefined) return
      answered++
      t.same(scanned.usage, bodyUsage(value))
      t.equal(scanned.model, typeof value.model === 'string' ? value.model : null)
    }),
    { numRuns: 2000 },
  )
  t.ok(answered > 50, `the scan answered ${answered} of 2000`)
})

t.test('a tail window keeps the last bytes of a body going by in chunks', async (t) => {
  const reply = bytes({ object: 'list', data: new Array(20000).fill(1), usage: USAGE })
  const tail = new TailWindow()
  for (let at = 0; at < reply.length; at += 1000) tail.push(reply.subarray(at, at + 1000))
  const kept = tail.bytes()
  t.ok(kept.length >= SCAN_WINDOW_BYTES && kept.length < SCAN_WINDOW_BYTES + 1000)
  t.same(kept, reply.subarray(reply.length - kept.length))
  t.same(usageInTail(kept), { inputTokens: 11, outputTokens: 5 })
})
