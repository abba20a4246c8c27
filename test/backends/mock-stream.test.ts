// Pacing and ending of the mock's streams: frames are released on a clock, and a client
// that leaves (the request's signal aborts) or a backend that closes ends the stream at
// once, with no further writes and no timer left behind.
import t from 'tap'
import { once } from 'node:events'
import type { Readable } from 'node:stream'
import type { MockBackendConfig } from '../../src/config/schema.ts'
import type { UpstreamRequest } from '../../src/backends/port.ts'
import { createMockBackend } from '../../src/backends/mock/index.ts'
import { pacedStream, type Frame } from '../../src/backends/mock/sse.ts'

const client = {} as unknown as UpstreamRequest['client']

function chatStream(signal: AbortSignal, maxTokens: number): UpstreamRequest {
  return {
    endpoint: 'chat.completions',
    method: 'POST',
    path: '/chat/completions',
    model: 'm',
    requestId: 'req-stream',
    body: {
      kind: 'json',
      value: { model: 'm', messages: [{ role: 'user', content: 'go' }], stream: true, max_tokens: maxTokens },
    },
    signal,
    client,
  }
}

function config(tokensPerSecond: number): MockBackendConfig {
  return { type: 'mock', tokensPerSecond, defaultCompletionTokens: 24, fineTuneStepMs: 10 }
}

const activeTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length

/** Everything the stream has buffered right now, without waiting. */
function buffered(stream: Readable): string {
  let text = ''
  for (let chunk = stream.read() as Buffer | null; chunk !== null; chunk = stream.read() as Buffer | null)
    text += chunk.toString()
  return text
}

t.test('frames wait for their turn: at 1 token a second only the first piece is out at once', async (t) => {
  const backend = createMockBackend('slow', config(1))
  const controller = new AbortController()
  const res = await backend.send(chatStream(controller.signal, 50))
  // Only microtasks have run since send() began, so no timer can have fired yet.
  const early = buffered(res.body)
    .split('\n\n')
    .filter((f) => f !== '')
  t.equal(early.length, 2, 'the role chunk and the first piece')
  t.match(early[0], /"role":"assistant"/)
  t.match(early[1], /"content":"This"/)
  controller.abort()
  await backend.close()
})

t.test('aborting mid-stream destroys the body, writes nothing more, and clears the timer', async (t) => {
  const timersBefore = activeTimers()
  const backend = createMockBackend('mock', config(200))
  const controller = new AbortController()
  const res = await backend.send(chatStream(controller.signal, 5_000))
  const body = res.body
  let frames = 0
  body.on('data', (chunk: Buffer) => {
    frames += chunk.toString().split('\n\n').length - 1
  })
  // Let a few paced frames through, then leave like a client closing its socket.
  for (let i = 0; i < 200 && frames < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.ok(frames >= 5, 'the stream was flowing')
  t.equal(activeTimers(), timersBefore + 1, 'one pacing timer while streaming')
  const closed = once(body, 'close')
  controller.abort()
  await closed
  t.ok(body.destroyed, 'the body is destroyed')
  t.notOk(body.readableEnded, 'it did not end as if complete')
  const seen = frames
  await new Promise((resolve) => setTimeout(resolve, 30))
  t.equal(frames, seen, 'no frame after the abort')
  t.equal(activeTimers(), timersBefore, 'no timer left behind')
  await backend.close()
})

t.test('a request whose signal has already aborted gets a dead stream', async (t) => {
  const backend = createMockBackend('mock', config(1000))
  const res = await backend.send(chatStream(AbortSignal.abort(), 10))
  t.ok(res.body.destroyed)
  t.equal(buffered(res.body), '')
})

t.test('the reader destroying the body stops the timer too', async (t) => {
  const timersBefore = activeTimers()
  const backend = createMockBackend('mock', config(1))
  const res = await backend.send(chatStream(new AbortController().signal, 100))
  t.equal(activeTimers(), timersBefore + 1)
  res.body.destroy()
  await once(res.body, 'close')
  t.equal(activeTimers(), timersBefore)
})

t.test('close() ends every open stream of the backend', async (t) => {
  const backend = createMockBackend('mock', config(1))
  const first = await backend.send(chatStream(new AbortController().signal, 100))
  const second = await backend.send(chatStream(new AbortController().signal, 100))
  await backend.close()
  t.ok(first.body.destroyed)
  t.ok(second.body.destroyed)
})

t.test('pacedStream: unpaced frames ride with the frame before them, and the stream ends after the last', async (t) => {
  const frames: Frame[] = [
    { text: 'a', paced: false },
    { text: 'b', paced: true },
    { text: 'c', paced: false },
    { text: 'd', paced: true },
    { text: 'e', paced: false },
  ]
  const stream = pacedStream(frames, 1, new AbortController().signal)
  t.equal(buffered(stream), 'abc', 'up to the second paced frame at once')
  stream.destroy()

  const fast = pacedStream(frames, 10_000, new AbortController().signal)
  let all = ''
  for await (const chunk of fast) all += String(chunk)
  t.equal(all, 'abcde', 'all frames, in order, then the end')
})

t.test('a long stream at a high rate completes with every frame', async (t) => {
  const backend = createMockBackend('mock', config(5_000))
  const res = await backend.send(chatStream(new AbortController().signal, 400))
  let raw = ''
  for await (const chunk of res.body) raw += String(chunk)
  t.match(raw, /data: \[DONE\]\n\n$/)
  const contentFrames = raw.split('\n\n').filter((f) => f.includes('"content":"') && !f.includes('"role"'))
  t.ok(contentFrames.length >= 390, 'about one frame per token')
})
