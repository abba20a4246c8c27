// The usage tap reads a prompt's cache parts apart, in every shape a backend reports them:
// chat (prompt_tokens_details), the Responses API (input_tokens_details), JSON bodies,
// stream events and a reply's last bytes; never more of them than the prompt.
import t from 'tap'
import { bodyUsage, readEvent, usageOf } from '../../src/proxy/usage-tap.ts'
import { scanReply, usageInTail } from '../../src/proxy/reply-scan.ts'
import { chatUsageOf } from '../../src/backends/anthropic/reply-in.ts'

t.test('chat: cached_tokens is a read, cache_write_tokens a write, both parts of prompt_tokens', async (t) => {
  t.strictSame(
    usageOf({
      prompt_tokens: 1000,
      completion_tokens: 7,
      prompt_tokens_details: { cached_tokens: 600, cache_write_tokens: 300, audio_tokens: 0 },
    }),
    { inputTokens: 1000, outputTokens: 7, cacheReadTokens: 600, cacheWriteTokens: 300 },
  )
  t.strictSame(
    usageOf({ prompt_tokens: 10, completion_tokens: 1, prompt_tokens_details: { cached_tokens: 0 } }),
    {
      inputTokens: 10,
      outputTokens: 1,
    },
    'none cached: no cache parts',
  )
})

t.test('the Responses API: input_tokens_details', async (t) => {
  t.strictSame(
    usageOf({
      input_tokens: 50,
      output_tokens: 5,
      input_tokens_details: { cached_tokens: 20, cache_write_tokens: 10 },
    }),
    { inputTokens: 50, outputTokens: 5, cacheReadTokens: 20, cacheWriteTokens: 10 },
  )
})

t.test('never more cached than the prompt: reads first, writes from what is left', async (t) => {
  t.strictSame(
    usageOf({
      prompt_tokens: 100,
      completion_tokens: 0,
      prompt_tokens_details: { cached_tokens: 90, cache_write_tokens: 50 },
    }),
    { inputTokens: 100, outputTokens: 0, cacheReadTokens: 90, cacheWriteTokens: 10 },
  )
  t.strictSame(
    usageOf({
      prompt_tokens: 5,
      completion_tokens: 0,
      prompt_tokens_details: { cached_tokens: -3, cache_write_tokens: 'x' },
    }),
    { inputTokens: 5, outputTokens: 0 },
    'nonsense is none',
  )
})

t.test("an anthropic upstream's four counts come through whole", async (t) => {
  const usage = chatUsageOf({
    input_tokens: 12,
    output_tokens: 30,
    cache_creation_input_tokens: 2000,
    cache_read_input_tokens: 5000,
  })
  t.strictSame(usageOf(usage), { inputTokens: 7012, outputTokens: 30, cacheReadTokens: 5000, cacheWriteTokens: 2000 })
})

t.test('bodies, stream events and tails all carry them', async (t) => {
  const usage = { prompt_tokens: 40, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 32 } }
  const want = { inputTokens: 40, outputTokens: 2, cacheReadTokens: 32 }
  const body = { id: 'c', object: 'chat.completion', model: 'm', choices: [], usage }
  t.strictSame(bodyUsage(body), want)
  t.strictSame(readEvent({ object: 'chat.completion.chunk', choices: [], usage }).usage, want)
  t.strictSame(
    readEvent({
      type: 'response.completed',
      response: { usage: { input_tokens: 40, output_tokens: 2, input_tokens_details: { cached_tokens: 32 } } },
    }).usage,
    want,
  )
  const bytes = Buffer.from(JSON.stringify(body))
  t.strictSame(scanReply(bytes)?.usage, want)
  t.strictSame(usageInTail(bytes), want)
})
