// Fuzz the response cache's isolation (issue #42, "tests and the fuzz suite try"): callers in
// two scopes (two owners; then two tenants of two owners each, on Redis) send bodies drawn at
// random from one shared pool: the same prompts, JSON or streamed, with fields the key leaves
// out (user, metadata naming the other caller, stream_options), Cache-Control variations, and
// each owner's uploaded file named in the body (so each names the other's too). The upstream
// (the mock) writes a fresh id into every reply it makes; a hit names the reply it replays in
// x-tollgate-cache-origin-id. Property: every hit replays a reply first made for a caller of
// its own scope, with that reply's content; a body naming another owner's file is refused
// (404) and never answered, from the cache or otherwise.
// Cases: FUZZ_CASES (default 240 a scope kind); the seed is fixed (FUZZ_SEED picks another).
import fc from 'fast-check'
import OpenAI from 'openai'
import t, { type Test } from 'tap'
import { pollUntil } from '../helpers/poll.ts'
import { testNamespace } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { adminSend, onSharedRedis, startCacheGateway } from '../cache/helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const CASES = Number(process.env.FUZZ_CASES ?? 240)
const SEED = Number(process.env.FUZZ_SEED ?? 42)
/** Requests in flight at once: concurrent misses and hits of one body race each other. */
const BATCH = 6

interface Caller {
  readonly name: string
  readonly scope: string
  readonly client: OpenAI
  fileId: string
}

/** One pool entry: a prompt, and whose file (if anyone's) it names. */
interface PoolBody {
  readonly prompt: string
  readonly fileOf: number | null
}

interface Case {
  readonly caller: number
  readonly body: number
  readonly stream: boolean
  readonly user: boolean
  readonly metadataNames: number | null
  readonly cacheControl: string | null
}

interface Seen {
  readonly scope: string
  readonly content: string
}

const WORDS = ['alpha', 'beta', 'gamma', 'delta', 'the invoice', 'my secret', 'file', 'tenant']

function arbitraries(callers: number): { pool: fc.Arbitrary<PoolBody[]>; cases: fc.Arbitrary<Case> } {
  const pool = fc.array(
    fc.record({
      prompt: fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 3 }).map((w) => w.join(' ')),
      fileOf: fc.option(fc.nat({ max: callers - 1 }), { freq: 2 }),
    }),
    { minLength: 10, maxLength: 10 },
  )
  const cases = fc.record({
    caller: fc.nat({ max: callers - 1 }),
    body: fc.nat({ max: 9 }),
    stream: fc.boolean(),
    user: fc.boolean(),
    metadataNames: fc.option(fc.nat({ max: callers - 1 }), { freq: 3 }),
    cacheControl: fc.option(fc.constantFrom('max-age=600', 'max-age=0', 'no-cache', 'no-store', 'no-transform'), {
      freq: 4,
    }),
  })
  return { pool, cases }
}

function bodyOf(entry: PoolBody, c: Case, callers: readonly Caller[]): OpenAI.ChatCompletionCreateParams {
  const file = entry.fileOf === null ? undefined : callers[entry.fileOf]?.fileId
  const content: OpenAI.ChatCompletionContentPart[] | string =
    file === undefined
      ? entry.prompt
      : [
          { type: 'text', text: entry.prompt },
          { type: 'file', file: { file_id: file } },
        ]
  const other = c.metadataNames === null ? undefined : callers[c.metadataNames]
  return {
    model: MODEL,
    temperature: 0,
    max_tokens: 12,
    messages: [{ role: 'user', content }],
    ...(c.user ? { user: callers[c.caller]?.name ?? '' } : {}),
    ...(other === undefined ? {} : { metadata: { on_behalf_of: other.name, scope: other.scope } }),
  }
}

interface Outcome {
  readonly c: Case
  readonly status: number
  readonly cache: string | null
  readonly origin: string | null
  readonly id: string
  readonly content: string
}

async function send(callers: readonly Caller[], pool: readonly PoolBody[], c: Case): Promise<Outcome> {
  const caller = callers[c.caller]
  const entry = pool[c.body]
  if (caller === undefined || entry === undefined) throw new Error('a case outside its pool')
  const body = bodyOf(entry, c, callers)
  const options = c.cacheControl === null ? {} : { headers: { 'cache-control': c.cacheControl } }
  try {
    if (c.stream) {
      const { data, response } = await caller.client.chat.completions
        .create({ ...body, stream: true, stream_options: { include_usage: true } }, options)
        .withResponse()
      let id = ''
      let content = ''
      for await (const chunk of data) {
        id ||= chunk.id
        content += chunk.choices[0]?.delta.content ?? ''
      }
      const h = response.headers
      return {
        c,
        status: 200,
        cache: h.get('x-tollgate-cache'),
        origin: h.get('x-tollgate-cache-origin-id'),
        id,
        content,
      }
    }
    const { data, response } = await caller.client.chat.completions
      .create({ ...body, stream: false }, options)
      .withResponse()
    const h = response.headers
    return {
      c,
      status: 200,
      cache: h.get('x-tollgate-cache'),
      origin: h.get('x-tollgate-cache-origin-id'),
      id: data.id,
      content: data.choices[0]?.message.content ?? '',
    }
  } catch (e) {
    if (e instanceof OpenAI.APIError)
      return { c, status: e.status ?? 0, cache: null, origin: null, id: '', content: '' }
    throw e
  }
}

/** Sends the cases in batches; checks each batch once it is over (a hit comes after its miss's reply ended). */
async function run(t: Test, callers: readonly Caller[]): Promise<void> {
  const { pool: poolArb, cases: caseArb } = arbitraries(callers.length)
  const [pool] = fc.sample(poolArb, { seed: SEED, numRuns: 1 })
  const cases = fc.sample(caseArb, { seed: SEED + 1, numRuns: CASES })
  if (pool === undefined) throw new Error('no pool')
  const made = new Map<string, Seen>()
  const bad: string[] = []
  const counts = { hit: 0, miss: 0, bypass: 0, refused: 0 }
  for (let i = 0; i < cases.length; i += BATCH) {
    const outcomes = await Promise.all(cases.slice(i, i + BATCH).map((c) => send(callers, pool, c)))
    // The batch's upstream replies first: a call of the batch may hit the reply of one sent beside it.
    for (const o of outcomes) {
      const caller = callers[o.c.caller]
      if (caller === undefined || o.status !== 200 || o.cache === 'hit' || o.id === '') continue
      if (made.has(o.id)) bad.push(`case ${JSON.stringify(o.c)}: an upstream reply id seen twice (${o.id})`)
      made.set(o.id, { scope: caller.scope, content: o.content })
    }
    for (const o of outcomes) {
      const caller = callers[o.c.caller]
      const entry = pool[o.c.body]
      if (caller === undefined || entry === undefined) continue
      const foreignFile = entry.fileOf !== null && entry.fileOf !== o.c.caller
      const where = `case ${JSON.stringify(o.c)} (${caller.name})`
      if (foreignFile) {
        counts.refused++
        if (o.status !== 404) bad.push(`${where}: named another owner's file and got ${o.status} (${o.cache})`)
        continue
      }
      if (o.status !== 200) {
        bad.push(`${where}: ${o.status}`)
        continue
      }
      if (o.cache === 'hit') {
        counts.hit++
        const first = o.origin === null ? undefined : made.get(o.origin)
        if (first === undefined) bad.push(`${where}: a hit replaying ${o.origin}, which no caller was sent`)
        else if (first.scope !== caller.scope)
          bad.push(`${where}: a hit replaying a reply made for scope ${first.scope} in scope ${caller.scope}`)
        else if (first.content !== o.content) bad.push(`${where}: a hit whose content is not its origin's`)
      } else {
        if (o.cache === 'miss') counts.miss++
        else counts.bypass++
      }
    }
  }
  t.same(bad.slice(0, 10), [], 'every hit replays a reply of its own scope; foreign files are refused')
  t.ok(counts.hit > CASES / 10, `the cache was hit (${JSON.stringify(counts)})`)
  t.ok(counts.refused > 0 && counts.miss > 0, 'misses and refusals happened too')
}

async function withFile(caller: Omit<Caller, 'fileId'>): Promise<Caller> {
  const file = await caller.client.files.create({
    file: new File([`notes of ${caller.name}`], 'n.txt'),
    purpose: 'user_data',
  })
  return { ...caller, fileId: file.id }
}

t.test(`two owners, owner scope, embedded: ${CASES} cases (seed ${SEED})`, async (t) => {
  const gw = await startCacheGateway({ store: 'embedded', cache: { scope: 'owner' } })
  t.teardown(() => gw.stop())
  const callers: Caller[] = []
  for (const name of ['alice', 'bob']) {
    const { key } = await gw.createKey({ tier: 'Standard4000', owner: name })
    callers.push(await withFile({ name, scope: name, client: sdkClient(gw, key) }))
  }
  await run(t, callers)
})

t.test(`two tenants of two owners each, tenant scope, Redis: ${CASES} cases (seed ${SEED})`, async (t) => {
  const { prefix } = testNamespace(t, 'fuzz-cache', 'fuzz-cache-test').fresh()
  const gw = await startCacheGateway({ store: 'redis', redis: onSharedRedis(prefix), cache: { scope: 'tenant' } })
  t.teardown(() => gw.stop())
  const members = [
    ['ann', 'acme'],
    ['art', 'acme'],
    ['eve', 'globex'],
    ['ed', 'globex'],
  ] as const
  for (const [username, tenant] of members)
    await adminSend(gw, 'POST', '/admin/users', { username, password: 'a long enough password 1', tenant })
  // The accounts' tenants are read while a tenant budget is set (budgets/book.ts).
  for (const tenant of ['acme', 'globex'])
    await adminSend(gw, 'PUT', `/admin/budgets/tenant/${tenant}`, { amount: 1000, period: 'month' })
  const callers: Caller[] = []
  for (const [name, tenant] of members) {
    const { key } = await gw.createKey({ tier: 'Standard4000', owner: name })
    callers.push(await withFile({ name, scope: tenant, client: sdkClient(gw, key) }))
  }
  // Until the accounts are read (a second at most) an owner is in no tenant: a probe shared within each tenant.
  const probe = { model: MODEL, temperature: 0, messages: [{ role: 'user' as const, content: 'a probe' }] }
  for (const [a, b] of [
    [0, 1],
    [2, 3],
  ] as const) {
    const known = await pollUntil(
      async () => {
        await callers[a]?.client.chat.completions.create(probe)
        const again = await callers[b]?.client.chat.completions.create(probe).withResponse()
        return again?.response.headers.get('x-tollgate-cache')
      },
      (v) => v === 'hit',
      100,
      100,
    )
    t.ok(known.met, 'the tenants are known')
  }
  await run(t, callers)
})
