// What a newcomer meets first when a URL is a little off (issue 20, item 17): the gateway's
// address opened as is, inference asked for under /v1 (where the OpenAI SDK's default base
// path puts it), vector stores under /v2, a model that is not there. Each answer says where
// the thing is, in the contract's shape.
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'

let gw: RunningTollgate
let key: string

t.before(async () => {
  gw = await startTollgate()
  key = (await gw.createKey({ tier: 'Standard1000' })).key
})
t.teardown(() => gw?.stop())

const call = async (
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> => {
  const res = await fetch(`${gw.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, json: (await res.json()) as Record<string, unknown> }
}
const messageOf = (json: Record<string, unknown>): string =>
  String((json.error as { message?: unknown } | undefined)?.message ?? '')

t.test('GET / says where the API, its reference, the models and the portal are', async (t) => {
  const res = await fetch(`${gw.url}/`)
  t.equal(res.status, 200)
  const body = (await res.json()) as { object: string; links: Record<string, string> }
  t.equal(body.object, 'tollgate')
  t.match(body.links, { models: '/v2/models', api_reference: '/redoc', portal: '/portal', openapi: '/openapi.json' })
  for (const path of ['/v2/models', '/redoc', '/portal', '/openapi.json']) {
    const linked = await fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' })
    t.ok(linked.status < 400, `${path} answers (${linked.status})`)
  }
})

t.test('inference under /v1 points to /v2; vector stores under /v2 point to /v1', async (t) => {
  const chat = await call('POST', '/v1/chat/completions', {
    model: 'gpt-4o',
    messages: [{ role: 'user', content: 'hi' }],
  })
  t.equal(chat.status, 404)
  t.match(chat.json, { error: { code: 'unknown_url', type: 'invalid_request_error' } })
  t.match(messageOf(chat.json), /Inference is served under \/v2: POST \/v2\/chat\/completions/)
  const models = await call('GET', '/v1/models')
  t.match(messageOf(models.json), /GET \/v2\/models/)
  const stores = await call('POST', '/v2/vector_stores', { name: 'x' })
  t.equal(stores.status, 404)
  t.match(messageOf(stores.json), /vector stores are served under \/v1: POST \/v1\/vector_stores/)
  const nowhere = await call('GET', '/v3/whatever')
  t.match(messageOf(nowhere.json), /GET \/ lists where/)
  t.equal(nowhere.json.detail, messageOf(nowhere.json), 'detail carries the same message')
})

t.test('an unknown model names GET /v2/models, through the SDK too', async (t) => {
  const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
  const error = await client.chat.completions
    .create({ model: 'gpt-4-turbo-nope', messages: [{ role: 'user', content: 'hi' }] })
    .then(
      () => null,
      (e: unknown) => e as { status: number; message: string },
    )
  t.equal(error?.status, 404)
  t.match(error?.message, /GET \/v2\/models lists the models this key may use/)
  const retrieved = await client.models.retrieve('nope').then(
    () => null,
    (e: unknown) => e as { status: number; message: string },
  )
  t.match(retrieved?.message, /GET \/v2\/models/)
})

t.test("the README's streamed call: a reply that ends by itself ends on a sentence", async (t) => {
  const client = new OpenAI({ baseURL: `${gw.url}/v2`, apiKey: key, maxRetries: 0 })
  let text = ''
  let finish: string | null | undefined
  for await (const chunk of await client.chat.completions.create({
    model: 'Mistral-Small-24B-Instruct-2501',
    messages: [{ role: 'user', content: 'Stream!' }],
    stream: true,
  })) {
    text += chunk.choices[0]?.delta?.content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
  }
  t.equal(finish, 'stop')
  t.match(text, /^This is Tollgate's mock backend replying to prompt #[0-9a-f]{6}\.( [A-Z][a-z]+( [a-z]+)+\.)+$/)
})
