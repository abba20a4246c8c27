// The provider's Chat Completions guide (telekom/aifoundation-docs, src/content/docs/v1/
// guides/chat-completions.mdx) and its Reasoning Control guide (guides/reasoning.mdx),
// against the gateway `npm start` runs. Each example is a call written here after the
// heading named beside it; Python goes to the JS SDK call for call (`OpenAI()` reads the
// environment, docs-gateway.ts). The mock answers every model, so what is checked is what
// a reader relies on: the fields the example prints are there, and the parameters the
// page documents are accepted and honoured.
import OpenAI from 'openai'
import t from 'tap'
import { curlJson, startDocsGateway } from './docs-gateway.ts'

const { key, base } = await startDocsGateway()
const client = new OpenAI()

t.test('chat-completions.mdx, Basic Usage (curl)', async (t) => {
  const res = await curlJson(`${base}/chat/completions`, key, {
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is T-Cloud?' },
    ],
    temperature: 0.1,
    max_tokens: 256,
  })
  t.equal(res.status, 200)
  const body = (await res.json()) as OpenAI.ChatCompletion
  t.equal(body.choices[0]?.message.role, 'assistant')
  t.type(body.choices[0]?.message.content, 'string')
})

t.test('chat-completions.mdx, Basic Usage (Python and Node.js)', async (t) => {
  const response = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is T-Cloud?' },
    ],
    temperature: 0.1,
    max_tokens: 256,
  })
  t.ok(response.choices[0]?.message.content?.length, 'print(response.choices[0].message.content)')
  t.ok((response.usage?.completion_tokens ?? 0) <= 256)
})

t.test('chat-completions.mdx, Streaming: print each delta that has content', async (t) => {
  const stream = await client.chat.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    messages: [{ role: 'user', content: 'Write a short poem about AI.' }],
    stream: true,
  })
  let printed = ''
  for await (const chunk of stream) {
    if (chunk.choices.length > 0 && chunk.choices[0]?.delta.content) printed += chunk.choices[0].delta.content
  }
  t.ok(printed.length > 0, 'text arrived in chunks')
})

t.test('chat-completions.mdx, Completion API: completions.create with a raw prompt', async (t) => {
  const completion = await client.completions.create({
    model: 'Llama-3.3-70B-Instruct',
    prompt: 'What is the Python programming language?',
    stream: false,
    temperature: 0.2,
    max_tokens: 128,
  })
  t.equal(completion.object, 'text_completion')
  t.ok(completion.choices[0]?.text.length, 'print(completion.choices[0].text)')
  t.ok((completion.usage?.completion_tokens ?? 0) <= 128)
})

t.test('chat-completions.mdx, Response API: responses.create, then output_text', async (t) => {
  const response = await client.responses.create({
    model: 'gpt-4.1',
    input: 'Write a one-sentence bedtime story about a unicorn.',
  })
  t.equal(response.object, 'response')
  t.ok(response.output_text.length > 0, 'print(response.output_text)')
})

t.test('chat-completions.mdx, Response API: input and instructions, then output[0].content[0].text', async (t) => {
  const response = await client.responses.create({
    model: 'gpt-4.1',
    instructions: 'You are a professional copywriter. Focus on benefits rather than features.',
    input: 'Create a product description for NoiseGuard Pro Headphones.',
    temperature: 0.7,
    max_output_tokens: 200,
  })
  const first = response.output[0]
  t.equal(first?.type, 'message')
  const part = first?.type === 'message' ? first.content[0] : undefined
  t.equal(part?.type, 'output_text')
  t.ok(part?.type === 'output_text' && part.text.length > 0, 'print(response.output[0].content[0].text)')
  t.ok((response.usage?.output_tokens ?? 0) <= 200, 'max_output_tokens honoured')
})

t.test('chat-completions.mdx, Parameters: model, messages, temperature, max_tokens, stream, top_p', async (t) => {
  // Every documented parameter at once, at the ends of its range: accepted, and max_tokens binds.
  for (const temperature of [0, 2]) {
    const reply = await client.chat.completions.create({
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'Say something.' }],
      temperature,
      top_p: 0.9,
      max_tokens: 5,
      stream: false,
    })
    t.ok((reply.usage?.completion_tokens ?? 0) <= 5, `temperature ${temperature}: at most 5 tokens`)
    t.equal(reply.choices[0]?.finish_reason, 'length')
  }
})

// reasoning.mdx, "Supported Models": reasoning_effort on o1, o1-mini, o3, o3-mini, o4-mini,
// Gemini 2.5 and Claude 3.7 / 4; the example itself uses claude-sonnet-4.
t.test('reasoning.mdx, Using reasoning_effort: claude-sonnet-4 with "low"', async (t) => {
  const response = await client.chat.completions.create({
    model: 'claude-sonnet-4',
    messages: [
      { role: 'system', content: 'You are a concise and helpful assistant.' },
      { role: 'user', content: 'What is the capital of France?' },
    ],
    reasoning_effort: 'low',
  })
  t.type(response.choices[0]?.message.content, 'string')
})

t.test('reasoning.mdx, Supported Models: every listed model takes low, medium and high', async (t) => {
  const models = [
    'o1',
    'o1-mini',
    'o3',
    'o3-mini',
    'o4-mini',
    'gemini-2.5-flash',
    'gemini-2.5-pro',
    'claude-3-7-sonnet',
    'claude-sonnet-4',
  ]
  const efforts = ['low', 'medium', 'high'] as const
  for (const [n, model] of models.entries()) {
    const effort = efforts[n % efforts.length] ?? 'low'
    const response = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content: 'Two plus two?' }],
      reasoning_effort: effort,
      max_tokens: 8,
    })
    t.equal(response.model, model, `${model} with reasoning_effort ${effort}`)
  }
})

t.test('reasoning.mdx, Disabling Reasoning for Qwen3: /no_think in the prompt', async (t) => {
  const response = await client.chat.completions.create({
    model: 'Qwen3-30B-A3B-FP8',
    messages: [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: '/no_think What is your name?' },
    ],
  })
  t.type(response.choices[0]?.message.content, 'string')
})
