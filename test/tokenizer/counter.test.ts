// The counter's worker, seen from the gateway's thread: it says when it is ready, counts
// answered by it are exact, and a gateway stopping can have every waiting count estimated
// at once rather than wait for a worker slow to start.
import { countTokens } from 'gpt-tokenizer'
import t from 'tap'
import { countTexts, estimateWaiting } from '../../src/tokenizer/counter.ts'
import { estimateTextTokens } from '../../src/tokenizer/estimate-text.ts'

const TEXT = 'The quick brown fox jumps over the lazy dog, and then it counts its tokens twice. '.repeat(40)

t.test('estimateWaiting answers the counts still waiting with their estimate, at once', async (t) => {
  // Sent before the worker exists: it is still loading the encoder when they are estimated.
  const counts = [countTexts([TEXT], 1_000_000), countTexts([TEXT, TEXT], 1_000_000)]
  t.equal(estimateWaiting(), 2, 'both were waiting')
  t.same(await Promise.all(counts), [estimateTextTokens(TEXT), 2 * estimateTextTokens(TEXT)], 'each its estimate')
  t.equal(estimateWaiting(), 0, 'nothing waits any more')
})

t.test('a count sent while the worker starts is answered by it, exactly', async (t) => {
  const exact = await countTexts([TEXT], 1_000_000)
  t.not(exact, estimateTextTokens(TEXT), 'not the estimate (the two differ on this text)')
  t.equal(await countTexts([TEXT], 1_000_000), exact, 'and the same once it is running')
  t.equal(exact, countTokens(TEXT), "the encoder's own count, in this thread")
})
