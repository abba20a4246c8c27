// The fake Bedrock Runtime (test/helpers/fake-bedrock.ts) held to AWS's own client,
// @aws-sdk/client-bedrock-runtime: what the SDK sends (SigV4-signed), the fake accepts; what
// the fake answers (Converse replies, ConverseStream's binary event stream with tool use and
// reasoning, errors by x-amzn-errortype, exceptions inside a stream), the SDK reads as it
// reads the real service's. The gateway's bedrock backend is tested against this fake.
import t from 'tap'
import {
  BedrockRuntimeClient,
  ConverseCommand,
  ConverseStreamCommand,
  ThrottlingException,
  ValidationException,
  type BedrockRuntimeServiceException,
  type ConverseStreamOutput,
} from '@aws-sdk/client-bedrock-runtime'
import {
  DEFAULT_USAGE,
  FAKE_AWS_CREDENTIALS,
  FAKE_REASONING,
  FAKE_REASONING_SIGNATURE,
  startFakeBedrock,
  type FakeAwsCredentials,
} from '../helpers/fake-bedrock.ts'

const fake = await startFakeBedrock()
t.teardown(() => fake.close())
const MODEL = 'anthropic.claude-sonnet-4-5-20250929-v1:0'
const client = (credentials: FakeAwsCredentials = FAKE_AWS_CREDENTIALS, region = 'us-east-1'): BedrockRuntimeClient =>
  new BedrockRuntimeClient({ region, endpoint: fake.origin, credentials, maxAttempts: 1 })
const sdk = client()
t.teardown(() => sdk.destroy())
const toolConfig = {
  tools: [
    {
      toolSpec: {
        name: 'get_weather',
        inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
      },
    },
  ],
}

async function collect(stream: AsyncIterable<ConverseStreamOutput> | undefined): Promise<ConverseStreamOutput[]> {
  const events: ConverseStreamOutput[] = []
  for await (const event of stream ?? []) events.push(event)
  return events
}

t.test('converse: text, stop reason and usage with cache tokens, signed', async (t) => {
  const reply = await sdk.send(
    new ConverseCommand({
      modelId: MODEL,
      system: [{ text: 'Be brief.' }],
      messages: [{ role: 'user', content: [{ text: 'Say hello.' }] }],
      inferenceConfig: { maxTokens: 50, stopSequences: ['END'] },
    }),
  )
  t.same(reply.output?.message?.content, [{ text: 'Hello from the fake Bedrock.' }])
  t.equal(reply.stopReason, 'end_turn')
  t.match(reply.usage, DEFAULT_USAGE)
  t.equal(
    reply.usage?.totalTokens,
    DEFAULT_USAGE.inputTokens +
      DEFAULT_USAGE.outputTokens +
      (DEFAULT_USAGE.cacheReadInputTokens ?? 0) +
      (DEFAULT_USAGE.cacheWriteInputTokens ?? 0),
  )
  const sent = fake.requests.at(-1)
  t.equal(sent?.modelId, MODEL, 'the model id travels escaped in the path')
  t.equal(sent?.path, `/model/${encodeURIComponent(MODEL)}/converse`)
  t.match(sent?.headers.authorization, /^AWS4-HMAC-SHA256 Credential=AKIAFAKEBEDROCK00001\/\d{8}\/us-east-1\/bedrock\//)
  t.equal(sent?.headers['x-amz-security-token'], FAKE_AWS_CREDENTIALS.sessionToken)
  t.same(sent?.json.system, [{ text: 'Be brief.' }])
  t.same(sent?.json.inferenceConfig, { maxTokens: 50, stopSequences: ['END'] })
})

t.test('converseStream: the event sequence in AWS framing, usage in metadata last', async (t) => {
  const reply = await sdk.send(
    new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'Say hello.' }] }] }),
  )
  const events = await collect(reply.stream)
  t.same(events[0], { messageStart: { role: 'assistant' } })
  const text = events.map((e) => e.contentBlockDelta?.delta?.text ?? '').join('')
  t.equal(text, 'Hello from the fake Bedrock.')
  t.ok(events.filter((e) => e.contentBlockDelta !== undefined).length > 1, 'several deltas')
  t.equal(events.at(-2)?.messageStop?.stopReason, 'end_turn')
  t.match(events.at(-1)?.metadata?.usage, DEFAULT_USAGE)
  t.equal(fake.requests.at(-1)?.operation, 'converse-stream')
})

t.test('tools: a toolUse, streamed input, then the result', async (t) => {
  const first = await sdk.send(
    new ConverseCommand({
      modelId: MODEL,
      messages: [{ role: 'user', content: [{ text: 'Weather in Paris?' }] }],
      toolConfig: { ...toolConfig, toolChoice: { any: {} } },
    }),
  )
  t.equal(first.stopReason, 'tool_use')
  const use = first.output?.message?.content?.[0]?.toolUse
  t.equal(use?.name, 'get_weather')
  t.same(use?.input, { city: 'Paris' })
  const second = await sdk.send(
    new ConverseCommand({
      modelId: MODEL,
      messages: [
        { role: 'user', content: [{ text: 'Weather in Paris?' }] },
        { role: 'assistant', content: [{ toolUse: use! }] },
        { role: 'user', content: [{ toolResult: { toolUseId: use!.toolUseId!, content: [{ text: '21C' }] } }] },
      ],
      toolConfig,
    }),
  )
  t.same(second.output?.message?.content, [{ text: 'get_weather said 21C' }])

  const streamed = await sdk.send(
    new ConverseStreamCommand({
      modelId: MODEL,
      messages: [{ role: 'user', content: [{ text: 'Weather in Paris?' }] }],
      toolConfig,
    }),
  )
  const events = await collect(streamed.stream)
  const start = events.find((e) => e.contentBlockStart !== undefined)?.contentBlockStart
  t.equal(start?.start?.toolUse?.name, 'get_weather')
  const input = events.map((e) => e.contentBlockDelta?.delta?.toolUse?.input ?? '').join('')
  t.same(JSON.parse(input), { city: 'Paris' })
  t.equal(events.find((e) => e.messageStop !== undefined)?.messageStop?.stopReason, 'tool_use')
})

t.test('an image as bytes, and reasoning with its signature', async (t) => {
  const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex')
  const seen = await sdk.send(
    new ConverseCommand({
      modelId: MODEL,
      messages: [{ role: 'user', content: [{ image: { format: 'png', source: { bytes: png } } }] }],
    }),
  )
  t.same(seen.output?.message?.content, [{ text: `I see png of ${png.length} bytes.` }])
  t.match(fake.requests.at(-1)?.json.messages, [
    { content: [{ image: { format: 'png', source: { bytes: png.toString('base64') } } }] },
  ])

  const thought = await sdk.send(
    new ConverseStreamCommand({
      modelId: MODEL,
      messages: [{ role: 'user', content: [{ text: 'Think.' }] }],
      additionalModelRequestFields: { thinking: { type: 'enabled', budget_tokens: 1024 } },
    }),
  )
  const events = await collect(thought.stream)
  const reasoning = events.map((e) => e.contentBlockDelta?.delta?.reasoningContent).filter((r) => r !== undefined)
  t.equal(reasoning[0]?.text, FAKE_REASONING)
  t.equal(reasoning[1]?.signature, FAKE_REASONING_SIGNATURE)
})

t.test('errors: each is the SDK class of its x-amzn-errortype', async (t) => {
  t.teardown(() => {
    delete fake.options.failWith
  })
  const ask = (): Promise<unknown> =>
    sdk
      .send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'Hi' }] }] }))
      .catch((e: unknown) => e)
  fake.options.failWith = { status: 429, type: 'ThrottlingException', message: 'Too many requests, please wait.' }
  const throttled = await ask()
  t.ok(throttled instanceof ThrottlingException, 'ThrottlingException')
  t.equal((throttled as ThrottlingException).message, 'Too many requests, please wait.')
  t.equal((throttled as ThrottlingException).$metadata.httpStatusCode, 429)

  delete fake.options.failWith
  const invalid = await sdk
    .send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'assistant', content: [{ text: 'Hi' }] }] }))
    .catch((e: unknown) => e)
  t.ok(invalid instanceof ValidationException, "the service's own validation: ValidationException")

  fake.options.failWith = { status: 503, type: 'ServiceUnavailableException', message: 'Service unavailable.' }
  const unavailable = (await ask()) as BedrockRuntimeServiceException
  t.equal(unavailable.name, 'ServiceUnavailableException')
})

t.test('an exception inside a stream is raised as its class', async (t) => {
  fake.options.streamFailWith = { exceptionType: 'throttlingException', message: 'Slow down.', afterEvents: 2 }
  t.teardown(() => {
    delete fake.options.streamFailWith
  })
  const reply = await sdk.send(
    new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'Hi' }] }] }),
  )
  const seen: ConverseStreamOutput[] = []
  const error = await (async () => {
    for await (const event of reply.stream ?? []) seen.push(event)
  })().catch((e: unknown) => e)
  t.equal(seen.length, 2, 'the events before it arrive')
  t.ok(error instanceof ThrottlingException, 'then ThrottlingException')
})

t.test('SigV4: a wrong secret, an unknown key and another region are refused with 403', async (t) => {
  const ask = (c: BedrockRuntimeClient): Promise<unknown> =>
    c
      .send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'Hi' }] }] }))
      .catch((e: unknown) => e)
      .finally(() => c.destroy())
  const badSecret = (await ask(
    client({ ...FAKE_AWS_CREDENTIALS, secretAccessKey: 'not/the/secret' }),
  )) as BedrockRuntimeServiceException
  t.equal(badSecret.name, 'InvalidSignatureException')
  t.equal(badSecret.$metadata.httpStatusCode, 403)
  const unknown = (await ask(
    client({ ...FAKE_AWS_CREDENTIALS, accessKeyId: 'AKIAUNKNOWN000000000' }),
  )) as BedrockRuntimeServiceException
  t.equal(unknown.name, 'UnrecognizedClientException')
  const elsewhere = (await ask(client(FAKE_AWS_CREDENTIALS, 'eu-west-1'))) as BedrockRuntimeServiceException
  t.equal(elsewhere.name, 'InvalidSignatureException')
  t.same(fake.refused.slice(-3), [
    'InvalidSignatureException',
    'UnrecognizedClientException',
    'InvalidSignatureException',
  ])
})
