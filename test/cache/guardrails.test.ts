// A masked request (guardrails with `restore`) whose reply comes from the cache gets exactly
// what a miss gets: a whole JSON reply has the caller's own values put back, a stream keeps
// its placeholders; and a reply restored for one caller is never stored, so another body
// that masks to the same text (another email) never gets the first caller's value. Both stores.
import t from 'tap'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { testNamespace } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { cachedPlans, onSharedRedis } from './helpers.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const A = 'erika.mustermann@example.de'
const B = 'max.muster@example.org'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
upstream.options.replyText = 'I will write to [EMAIL_1] today.'

for (const store of ['embedded', 'redis'] as const) {
  t.test(store, async (t) => {
    const redis =
      store === 'redis' ? onSharedRedis(testNamespace(t, 'cache-mask', 'cache-mask-test').fresh().prefix) : {}
    const gw = await startTollgate({
      ...redis,
      config: (doc) => {
        redis.config?.(doc)
        doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
        for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
          if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
        const plans = cachedPlans() as { tiers: Record<string, Record<string, unknown>> }
        plans.tiers.Standard4000!.guardrails = 'gdpr'
        doc.plans = plans
        doc.guardrails = { policies: { gdpr: { detectors: { email: 'mask' }, restore: true } } }
      },
    })
    t.teardown(() => gw.stop())
    const c = sdkClient(gw, (await gw.createKey({ tier: 'Standard4000', owner: `masked-${store}` })).key)
    const body = (email: string) => ({
      model: MODEL,
      temperature: 0,
      messages: [{ role: 'user' as const, content: `Please email ${email} the report.` }],
    })
    const json = async (email: string): Promise<[string | null, string]> => {
      const { data, response } = await c.chat.completions.create(body(email)).withResponse()
      return [response.headers.get('x-tollgate-cache'), data.choices[0]?.message.content ?? '']
    }
    const streamed = async (email: string): Promise<[string | null, string]> => {
      const { data, response } = await c.chat.completions.create({ ...body(email), stream: true }).withResponse()
      let text = ''
      for await (const chunk of data) text += chunk.choices[0]?.delta.content ?? ''
      return [response.headers.get('x-tollgate-cache'), text]
    }
    const restoredA = 'I will write to erika.mustermann@example.de today.'
    const restoredB = 'I will write to max.muster@example.org today.'
    const kept = 'I will write to [EMAIL_1] today.'
    t.same(await json(A), ['miss', restoredA], "a miss: the caller's value restored")
    t.same(await json(B), ['miss', restoredB], "another email, same masked text: its own value, never A's")
    t.same(await json(A), ['miss', restoredA], 'a restored reply was not stored')
    t.same(await streamed(A), ['miss', kept], 'a streamed miss keeps its placeholders, and is stored')
    t.same(await json(A), ['hit', restoredA], 'a JSON hit is restored for its caller, as a miss is')
    t.same(await json(B), ['hit', restoredB], 'and for a body that masks the same: its own value')
    t.same(await streamed(B), ['hit', kept], 'a streamed hit keeps the placeholders, as a streamed miss does')
    t.notOk(
      upstream.requests.some((r) => JSON.stringify(r.json).includes(A) || JSON.stringify(r.json).includes(B)),
      'the upstream saw no value',
    )
  })
}
