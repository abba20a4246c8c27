// Token estimates and counts: the estimate is close on ordinary text and linear on any;
// counting in pieces is exact on ordinary text and bounded on pathological text; the
// count runs off the event loop.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import t from 'tap'
import { estimateUsage } from '../../src/limits/estimate.ts'
import { countInPieces, cutPoint, CHUNK } from '../../src/tokenizer/chunked-count.ts'
import {
  countChatTokens,
  countTextTokens,
  estimateChatTokens,
  estimateTextTokens,
  loadEncoder,
} from '../../src/tokenizer/tokens.ts'
import { PATHOLOGICAL_KINDS, pathologicalText } from '../helpers/pathological.ts'

const ROOT = join(import.meta.dirname, '../..')
const encoder = await loadEncoder()

const SAMPLES: Record<string, string> = {
  'English prose (README)': readFileSync(join(ROOT, 'README.md'), 'utf8'),
  TypeScript: readFileSync(join(ROOT, 'src/proxy/relay.ts'), 'utf8'),
  JSON: readFileSync(join(ROOT, 'config/default.yaml'), 'utf8'),
  German:
    'Die Würde des Menschen ist unantastbar. Sie zu achten und zu schützen ist Verpflichtung aller staatlichen Gewalt. '.repeat(
      40,
    ),
  Chinese: '我们的网关在模型后端前面运行，团队不再需要考虑它。'.repeat(60),
  Russian: 'Привет, как дела? Это тестовый текст на русском языке для проверки. '.repeat(60),
  emoji: '😀🎉👍🏽'.repeat(300),
}

t.test('the estimate is within a third of the true count on ordinary text', async (t) => {
  for (const [name, text] of Object.entries(SAMPLES)) {
    const ratio = estimateTextTokens(text) / encoder.count(text)
    t.ok(ratio > 0.75 && ratio < 1.35, `${name}: estimate / count = ${ratio.toFixed(2)}`)
  }
})

t.test('the estimate of a range equals the estimate of the slice', async (t) => {
  const text = SAMPLES.German ?? ''
  t.equal(estimateTextTokens(text, 100, 900), estimateTextTokens(text.slice(100, 900)))
  t.equal(estimateTextTokens(''), 0)
})

t.test('the estimate is linear: 4 MB of each pathological kind in well under a second', async (t) => {
  for (const kind of PATHOLOGICAL_KINDS) {
    const text = pathologicalText(kind, 4_000_000)
    const started = performance.now()
    const tokens = estimateTextTokens(text)
    const ms = performance.now() - started
    t.ok(tokens > 0, `${kind}: ${tokens} tokens estimated`)
    // The tokenizer took 11 s for 200 KB of one letter; a linear pass takes milliseconds.
    t.ok(ms < 1000, `${kind}: estimated in ${ms.toFixed(1)} ms`)
  }
})

t.test(
  'pieces are at most CHUNK long, end before a space when one is near, and never split a surrogate pair',
  async (t) => {
    const prose = SAMPLES['English prose (README)'] ?? ''
    for (let start = 0; start < prose.length;) {
      const end = cutPoint(prose, start)
      if (end - start > CHUNK) t.fail(`piece at ${start} is ${end - start} long`)
      if (end < prose.length && end - start < CHUNK && !(prose[end] === ' ' && /\S/.test(prose[end - 1] ?? '')))
        t.fail(`piece at ${start} ends mid-word`)
      start = end
    }
    const emoji = '😀'.repeat(1000)
    for (let start = 0; start < emoji.length;) {
      const end = cutPoint(emoji, start)
      const unit = emoji.charCodeAt(end - 1)
      if (unit >= 0xd800 && unit <= 0xdbff) t.fail(`piece at ${start} ends on a high surrogate`)
      start = end
    }
    t.pass('walked both texts')
  },
)

t.test('counting in pieces is exact on ordinary text', async (t) => {
  for (const [name, text] of Object.entries(SAMPLES)) {
    if (name === 'emoji' || name === 'Chinese') continue // no spaces to cut at: counted approximately by design
    const result = countInPieces(encoder, [text], 10_000_000)
    t.equal(result.tokens, encoder.count(text), `${name}: ${result.tokens} tokens, same as one call`)
    t.ok(result.exact, `${name}: within budget`)
  }
})

t.test('counting in pieces stays linear on pathological text and honours its budget', async (t) => {
  for (const kind of PATHOLOGICAL_KINDS) {
    const text = pathologicalText(kind, 200_000)
    const started = performance.now()
    const whole = countInPieces(encoder, [text], 10_000_000)
    const ms = performance.now() - started
    // One call on the whole text: 11 s for the letters, about a minute for the emoji.
    t.ok(ms < 5000, `${kind}: 200 KB counted in ${ms.toFixed(0)} ms`)
    const ratio = whole.tokens / estimateTextTokens(text)
    t.ok(ratio > 0.3 && ratio < 3, `${kind}: ${whole.tokens} tokens, ${ratio.toFixed(2)}× the estimate`)
    const cut = countInPieces(encoder, [text], 0)
    t.notOk(cut.exact, `${kind}: with no budget the count is an estimate`)
    t.equal(cut.tokens, estimateTextTokens(text), `${kind}: ...the linear one`)
    const half = countInPieces(encoder, [text], text.length / 2)
    t.notOk(half.exact, `${kind}: with half a budget, half is counted...`)
    t.equal(
      countInPieces(encoder, [text], text.length / 2).tokens,
      half.tokens,
      `${kind}: a budget of characters gives the same count on a busy machine as on an idle one`,
    )
  }
})

t.test('the count runs off the event loop: 4 MB of each kind with the loop free throughout', async (t) => {
  await countTextTokens('warm the worker up')
  for (const kind of PATHOLOGICAL_KINDS) {
    const text = pathologicalText(kind, 4_000_000)
    const delay = monitorEventLoopDelay({ resolution: 5 })
    delay.enable()
    const tokens = await countTextTokens(text)
    delay.disable()
    const worstMs = delay.max / 1e6
    t.ok(tokens > 0, `${kind}: ${tokens} tokens`)
    t.ok(worstMs < 500, `${kind}: worst event-loop delay ${worstMs.toFixed(1)} ms while counting`)
  }
})

t.test('the worker counts what this thread counts', async (t) => {
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: [{ type: 'text', text: 'Hello there, gateway.' }], name: 'ann' },
  ]
  t.equal(await countTextTokens('Hello there, gateway.'), encoder.count('Hello there, gateway.'))
  // 3 to prime the reply, 3 per message, 1 for a name, and the texts.
  const expected =
    3 +
    3 * 2 +
    1 +
    ['Be brief.', 'system', 'Hello there, gateway.', 'user', 'ann'].reduce((sum, s) => sum + encoder.count(s), 0)
  t.equal(await countChatTokens(messages), expected)
  t.equal(await countTextTokens(''), 0)
  t.ok(Math.abs(estimateChatTokens(messages) - expected) <= 3, 'and the estimate is close')
})

t.test('the reservation: estimated prompt plus the completion the request may produce', async (t) => {
  const messages = [{ role: 'user', content: 'Count me.' }]
  const prompt = estimateChatTokens(messages)
  const options = { defaultMaxTokens: 1024 }
  t.same(
    estimateUsage('chat.completions', { messages }, options),
    { inputTokens: prompt, outputTokens: 1024, outputDefaulted: true, sentCap: 1024, replies: 1 },
    'the default without max_tokens, sent upstream as the cap',
  )
  t.same(
    estimateUsage('chat.completions', { messages, max_tokens: 10, n: 3 }, options),
    { inputTokens: prompt, outputTokens: 30, outputDefaulted: false },
    'n choices',
  )
  t.same(
    estimateUsage('chat.completions', { messages, max_completion_tokens: 7, max_tokens: 10 }, options).outputTokens,
    10,
    'both set: the larger, since servers differ on which wins',
  )
  t.same(
    estimateUsage('chat.completions', { messages, max_completion_tokens: 12, max_tokens: 10 }, options).outputTokens,
    12,
  )
  t.same(
    estimateUsage('completions', { prompt: 'x', max_tokens: 10, n: 2, best_of: 5 }, options).outputTokens,
    50,
    'best_of completions are generated',
  )
  t.same(
    estimateUsage('completions', { prompt: ['x', 'y', 'z'], max_tokens: 10, n: 2 }, options).outputTokens,
    60,
    'a batch of prompts: n completions each',
  )
  t.same(
    estimateUsage('completions', { prompt: [[1, 2], [3]], max_tokens: 10 }, options).outputTokens,
    20,
    'a batch of token lists too',
  )
  t.same(
    estimateUsage('completions', { prompt: [1, 2, 3], max_tokens: 10 }, options).outputTokens,
    10,
    'one token list is one prompt',
  )
  t.same(estimateUsage('responses', { input: 'x', max_output_tokens: 9 }, options).outputTokens, 9)
  t.same(estimateUsage('embeddings', { input: ['a b', 'c'] }, options).outputTokens, 0)
  const huge = { messages: [{ role: 'user', content: 'a'.repeat(1_000_000) }] }
  t.equal(
    estimateUsage('chat.completions', huge, { ...options, contextTokens: 128_000 }).inputTokens,
    128_000,
    'capped by the model context',
  )
  t.ok(estimateUsage('chat.completions', huge, options).inputTokens > 128_000, 'uncapped without one')
})

t.test('a call without a cap: the cap the tier sends, or the ceiling it holds', async (t) => {
  const messages = [{ role: 'user', content: 'Count me.' }]
  const send = { defaultMaxTokens: 1024, outputCap: 'send' as const }
  const ceiling = { defaultMaxTokens: 1024, outputCap: 'ceiling' as const }
  const out = (e: { outputTokens: number; sentCap?: number; outputDefaulted: boolean }) => [
    e.outputTokens,
    e.sentCap ?? null,
    e.outputDefaulted,
  ]
  t.same(out(estimateUsage('chat.completions', { messages, n: 3 }, send)), [3072, 1024, true], 'n replies, each capped')
  t.same(
    out(estimateUsage('chat.completions', { messages, n: 2 }, { ...send, outputCeiling: 300 })),
    [600, 300, true],
    "the model's ceiling when it is lower than defaultMaxTokens",
  )
  t.same(
    out(estimateUsage('completions', { prompt: ['x', 'y'], best_of: 3 }, send)),
    [6144, 1024, true],
    'best_of and a batch count as the estimate counts them',
  )
  t.same(out(estimateUsage('responses', { input: 'x' }, send)), [1024, 1024, true], 'responses: one reply')
  t.same(
    out(estimateUsage('chat.completions', { messages, n: 2 }, { ...ceiling, outputCeiling: 8192 })),
    [16384, null, true],
    'ceiling: the model ceiling per reply, and nothing sent',
  )
  t.same(
    out(estimateUsage('chat.completions', { messages }, ceiling)),
    [1024, 1024, true],
    'ceiling on a model without one: a cap sent, as with send',
  )
  t.same(
    out(estimateUsage('chat.completions', { messages, max_tokens: 5000 }, { ...send, outputCeiling: 300 })),
    [5000, null, false],
    "the client's own cap: reserved as it is, nothing sent",
  )
})
