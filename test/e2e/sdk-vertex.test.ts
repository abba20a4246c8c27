// The openai SDK onto Gemini models on Vertex AI: the gateway signs an assertion with the
// service account's key, trades it at the token endpoint for an access token, keeps it while
// it has more than a few minutes left and fetches the next one before it expires. The fake
// (test/helpers/fake-gemini.ts) verifies the assertion against the account's public key and
// serves the project's publisher models only to the tokens it issued.
import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import type { APIError } from 'openai'
import { startTollgate } from '../helpers/gateway.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { DEFAULT_USAGE, startFakeGemini } from '../helpers/fake-gemini.ts'

const fake = await startFakeGemini()
t.teardown(() => fake.close())
// The same account, signing with a key that is not its own.
const forged = JSON.stringify({
  ...(JSON.parse(fake.serviceAccount) as object),
  private_key: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
})
const vertex = (credentialsEnv: string): Record<string, unknown> => ({
  type: 'gemini',
  baseUrl: `${fake.origin}/v1`,
  vertex: { project: 'fake-project', location: 'us-central1', credentialsEnv },
})
const ON = { 'gemini-2.5-flash': 'vertex', 'gemini-2.5-pro': 'vertex-short', 'gemini-3-pro': 'vertex-forged' }
const gw = await startTollgate({
  env: { VERTEX_SA: fake.serviceAccount, VERTEX_SA_FORGED: forged },
  config: (doc) => {
    doc.backends = {
      ...(doc.backends as object),
      vertex: vertex('VERTEX_SA'),
      'vertex-short': vertex('VERTEX_SA'),
      'vertex-forged': vertex('VERTEX_SA_FORGED'),
    }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>) {
      const backend = ON[model.name as keyof typeof ON] as string | undefined
      if (backend !== undefined) model.deployments = [{ backend }]
    }
  },
})
t.teardown(() => gw.stop())
const client = sdkClient(gw, (await gw.createKey({ tier: 'Standard1000' })).key)
const ask = (model: string): Promise<unknown> =>
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }] }).catch((e: unknown) => e)

t.test('calls go to the publisher model with one access token, kept while it lasts', async (t) => {
  const reply = (await ask('gemini-2.5-flash')) as {
    choices: Array<{ message: { content: string } }>
    usage: { prompt_tokens: number }
  }
  t.equal(reply.choices[0]?.message.content, 'Hello from the fake Gemini.')
  t.equal(reply.usage.prompt_tokens, DEFAULT_USAGE.promptTokenCount)
  const stream = await client.chat.completions.create({
    model: 'gemini-2.5-flash',
    messages: [{ role: 'user', content: 'Hi' }],
    stream: true,
  })
  let text = ''
  for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
  t.equal(text, 'Hello from the fake Gemini.')
  const [first, second] = fake.requests.slice(-2)
  t.equal(
    first?.path,
    '/v1/projects/fake-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent',
  )
  t.match(second?.path, /\/publishers\/google\/models\/gemini-2\.5-flash:streamGenerateContent\?alt=sse$/)
  t.same(fake.tokens, ['ya29.fake-1'], 'one token for both calls')
  t.equal(first?.headers.authorization, 'Bearer ya29.fake-1')
  t.equal(second?.headers.authorization, 'Bearer ya29.fake-1')
  t.equal(first?.headers['x-goog-api-key'], undefined)
})

t.test('a token with less than the margin left is replaced before it expires', async (t) => {
  fake.options.tokenExpiresIn = 120
  t.teardown(() => {
    fake.options.tokenExpiresIn = 3599
  })
  const before = fake.tokens.length
  await ask('gemini-2.5-pro')
  await ask('gemini-2.5-pro')
  t.equal(fake.tokens.length, before + 2, 'each call found the kept token too close to its end')
  const [first, second] = fake.requests.slice(-2)
  t.not(first?.headers.authorization, second?.headers.authorization, 'the second call had a fresh token')
  t.equal(second?.headers.authorization, `Bearer ${fake.tokens.at(-1)}`)
})

t.test('a token revoked before its time is dropped: the call after the refusal fetches another', async (t) => {
  fake.revokeTokens()
  const before = fake.tokens.length
  const refused = (await ask('gemini-2.5-flash')) as APIError
  t.equal(refused.status, 502)
  t.equal(refused.code, 'upstream_auth_failed')
  const reply = (await ask('gemini-2.5-flash')) as { choices: Array<{ message: { content: string } }> }
  t.equal(reply.choices[0]?.message.content, 'Hello from the fake Gemini.')
  t.equal(fake.tokens.length, before + 1, 'one new token')
  t.equal(fake.requests.at(-1)?.headers.authorization, `Bearer ${fake.tokens.at(-1)}`)
})

t.test('a service account the token endpoint refuses is upstream_auth_failed', async (t) => {
  const before = fake.requests.length
  const error = (await ask('gemini-3-pro')) as APIError
  t.equal(error.status, 502)
  t.equal(error.code, 'upstream_auth_failed')
  t.equal(fake.requests.length, before, 'no model call without a token')
})
