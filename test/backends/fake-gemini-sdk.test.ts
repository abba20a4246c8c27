// The fake Gemini API (test/helpers/fake-gemini.ts) held against Google's own client, the
// @google/genai SDK: what it parses from the fake, the real service's clients parse too
// (thought parts and thoughtsTokenCount included).
import t from 'tap'
import { ApiError, GoogleGenAI, ThinkingLevel, Type } from '@google/genai'
import { DEFAULT_USAGE, FAKE_GEMINI_KEY, googleError, startFakeGemini } from '../helpers/fake-gemini.ts'

const fake = await startFakeGemini()
t.teardown(() => fake.close())
const client = (apiKey = FAKE_GEMINI_KEY): GoogleGenAI =>
  new GoogleGenAI({ apiKey, httpOptions: { baseUrl: fake.origin, retryOptions: { attempts: 1 } } })

t.test('generateContent: text, finish reason and usage metadata', async (t) => {
  const reply = await client().models.generateContent({
    model: 'gemini-2.5-flash',
    contents: 'Say hello.',
    config: { systemInstruction: 'Be brief.', maxOutputTokens: 50, stopSequences: ['END'] },
  })
  t.equal(reply.text, 'Hello from the fake Gemini.')
  t.equal(reply.candidates?.[0]?.finishReason, 'STOP')
  t.equal(reply.usageMetadata?.promptTokenCount, DEFAULT_USAGE.promptTokenCount)
  t.equal(reply.usageMetadata?.candidatesTokenCount, DEFAULT_USAGE.candidatesTokenCount)
  t.equal(reply.usageMetadata?.thoughtsTokenCount, DEFAULT_USAGE.thoughtsTokenCount)
  t.equal(reply.usageMetadata?.cachedContentTokenCount, DEFAULT_USAGE.cachedContentTokenCount)
  const sent = fake.requests.at(-1)
  t.equal(sent?.headers['x-goog-api-key'], FAKE_GEMINI_KEY, 'the SDK sends its key in x-goog-api-key')
  t.match(sent?.path, /^\/v1(beta)?\/models\/gemini-2\.5-flash:generateContent/)
  t.match(sent?.json.systemInstruction, { parts: [{ text: 'Be brief.' }] })
  t.same(sent?.json.generationConfig, { maxOutputTokens: 50, stopSequences: ['END'] })
})

t.test('generateContentStream: server-sent events, usage on the last', async (t) => {
  const stream = await client().models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'Say hello.' })
  const texts: string[] = []
  let last
  for await (const chunk of stream) {
    texts.push(chunk.text ?? '')
    last = chunk
  }
  t.ok(texts.length > 1, `several events (${texts.length})`)
  t.equal(texts.join(''), 'Hello from the fake Gemini.')
  t.equal(last?.candidates?.[0]?.finishReason, 'STOP')
  t.equal(last?.usageMetadata?.candidatesTokenCount, DEFAULT_USAGE.candidatesTokenCount)
  t.match(fake.requests.at(-1)?.path, /:streamGenerateContent\?alt=sse$/)
})

t.test('function calling: a call, then its response', async (t) => {
  const tools = [
    {
      functionDeclarations: [
        {
          name: 'get_weather',
          parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] },
        },
      ],
    },
  ]
  const first = await client().models.generateContent({
    model: 'gemini-2.5-flash',
    contents: 'Weather in Paris?',
    config: { tools },
  })
  const call = first.functionCalls?.[0]
  t.equal(call?.name, 'get_weather')
  t.same(call?.args, { city: 'Paris' })
  const second = await client().models.generateContent({
    model: 'gemini-2.5-flash',
    contents: [
      { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
      { role: 'model', parts: first.candidates?.[0]?.content?.parts ?? [] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { celsius: 21 } } }] },
    ],
    config: { tools },
  })
  t.equal(second.text, 'get_weather said {"celsius":21}')
  const model = fake.requests.at(-1)?.json.contents as Array<{ parts: Array<Record<string, unknown>> }>
  t.equal(model[1]?.parts[0]?.thoughtSignature, 'c2lnbmF0dXJl', 'the SDK sends the signature back')
})

t.test('thinking: thought parts when asked to include them, thoughtsTokenCount; a config Gemini refuses', async (t) => {
  const reply = await client().models.generateContent({
    model: 'gemini-2.5-flash',
    contents: 'Think first.',
    config: { thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } },
  })
  const parts = reply.candidates?.[0]?.content?.parts ?? []
  t.equal(parts[0]?.thought, true, 'a thought part first')
  t.ok((parts[0]?.text ?? '').length > 0)
  t.equal(reply.text, 'Hello from the fake Gemini.', 'the SDK leaves thoughts out of the text')
  t.equal(reply.usageMetadata?.thoughtsTokenCount, DEFAULT_USAGE.thoughtsTokenCount)
  t.same(fake.requests.at(-1)?.json.generationConfig, {
    thinkingConfig: { thinkingBudget: 1024, includeThoughts: true },
  })

  const stream = await client().models.generateContentStream({
    model: 'gemini-3-pro-preview',
    contents: 'Think first.',
    config: { thinkingConfig: { thinkingLevel: ThinkingLevel.LOW, includeThoughts: true } },
  })
  let thoughts = ''
  let text = ''
  for await (const chunk of stream)
    for (const part of chunk.candidates?.[0]?.content?.parts ?? [])
      if (part.thought === true) thoughts += part.text ?? ''
      else text += part.text ?? ''
  t.equal(thoughts, 'Weighing what was asked before answering.', 'thoughts streamed as thought parts')
  t.equal(text, 'Hello from the fake Gemini.')
  t.match(fake.requests.at(-1)?.json.generationConfig, { thinkingConfig: { thinkingLevel: 'LOW' } })

  const refused = await client()
    .models.generateContent({
      model: 'gemini-2.5-flash',
      contents: 'Hi',
      config: { thinkingConfig: { thinkingLevel: ThinkingLevel.LOW } },
    })
    .catch((e: unknown) => e)
  t.equal((refused as ApiError).status, 400, 'a thinking level to a 2.5 model is refused')
})

t.test('errors: 429 RESOURCE_EXHAUSTED and a key Gemini does not know', async (t) => {
  fake.options.failWith = {
    status: 429,
    body: googleError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).', [
      { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '37s' },
    ]),
  }
  t.teardown(() => {
    delete fake.options.failWith
  })
  const error = await client()
    .models.generateContent({ model: 'gemini-2.5-flash', contents: 'Hi' })
    .catch((e: unknown) => e)
  t.ok(error instanceof ApiError)
  t.equal((error as ApiError).status, 429)
  t.match((error as ApiError).message, /RESOURCE_EXHAUSTED/)
  delete fake.options.failWith
  const refused = await client('not-the-key')
    .models.generateContent({ model: 'gemini-2.5-flash', contents: 'Hi' })
    .catch((e: unknown) => e)
  t.equal((refused as ApiError).status, 400)
  t.match((refused as ApiError).message, /API key not valid/)
})
