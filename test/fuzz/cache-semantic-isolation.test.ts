// Fuzz the semantic cache's isolation (issue #42: "only within scope"): callers in two scopes
// send prompts drawn at random from one shared pool, in which every prompt of a topic has a
// vector within the threshold of its topic's others (paraphrases) — the same vectors for
// every caller, since the embedder sees only the text. Some carry a system prompt (another
// partition). Property: every hit, exact or semantic, replays a reply first made for a caller
// of its own scope, for a prompt of the same topic and the same system prompt, with that
// reply's content, and a semantic hit's similarity is at or above the threshold.
// Two owners (owner scope) on the embedded store; two keys of one owner (key scope) on Redis.
// Cases: FUZZ_CASES (default 120 a store); the seed is fixed (FUZZ_SEED picks another).
import fc from 'fast-check'
import type OpenAI from 'openai'
import t, { type Test } from 'tap'
import { testNamespace } from '../helpers/redis.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'
import { onSharedRedis } from '../cache/helpers.ts'
import { startFakeEmbedder, startSemanticGateway } from '../cache/semantic-helpers.ts'

const MODEL = 'Llama-3.3-70B-Instruct'
const CASES = Number(process.env.FUZZ_CASES ?? 120)
const SEED = Number(process.env.FUZZ_SEED ?? 42)
const BATCH = 4
const THRESHOLD = 0.9
const TOPICS = 3
const PER_TOPIC = 4

interface Case {
  readonly caller: number
  readonly topic: number
  readonly wording: number
  readonly system: boolean
  readonly stream: boolean
}

interface Made {
  readonly scope: string
  readonly topic: number
  readonly system: boolean
  readonly content: string
}

const prompt = (topic: number, wording: number): string => `topic ${topic}, wording ${wording}`

const embedder = await startFakeEmbedder(8)
t.teardown(() => embedder.close())
// Topic k points along axis k; each wording leans a little (cos >= 0.95) towards axis 7.
for (let k = 0; k < TOPICS; k++)
  for (let w = 0; w < PER_TOPIC; w++) {
    const v = new Array<number>(8).fill(0)
    v[k] = 1
    v[7] = w * 0.1
    embedder.vectors.set(prompt(k, w), v)
  }

async function send(client: OpenAI, c: Case) {
  const body = {
    model: MODEL,
    temperature: 0,
    max_tokens: 12,
    messages: [
      ...(c.system ? [{ role: 'system' as const, content: 'Answer as a pirate.' }] : []),
      { role: 'user' as const, content: prompt(c.topic, c.wording) },
    ],
  }
  if (c.stream) {
    const { data, response } = await client.chat.completions.create({ ...body, stream: true }).withResponse()
    let id = ''
    let content = ''
    for await (const chunk of data) {
      id ||= chunk.id
      content += chunk.choices[0]?.delta.content ?? ''
    }
    return { headers: response.headers, id, content }
  }
  const { data, response } = await client.chat.completions.create(body).withResponse()
  return { headers: response.headers, id: data.id, content: data.choices[0]?.message.content ?? '' }
}

async function run(t: Test, callers: ReadonlyArray<{ readonly scope: string; readonly client: OpenAI }>) {
  const cases = fc.sample(
    fc.record({
      caller: fc.nat({ max: callers.length - 1 }),
      topic: fc.nat({ max: TOPICS - 1 }),
      wording: fc.nat({ max: PER_TOPIC - 1 }),
      system: fc.boolean(),
      stream: fc.boolean(),
    }),
    { seed: SEED, numRuns: CASES },
  )
  const made = new Map<string, Made>()
  const bad: string[] = []
  const counts = { exact: 0, semantic: 0, miss: 0 }
  for (let i = 0; i < cases.length; i += BATCH) {
    const batch = cases.slice(i, i + BATCH)
    const outcomes = await Promise.all(batch.map((c) => send(callers[c.caller]!.client, c)))
    // The batch's misses first: a call of the batch may hit the reply of one sent beside it.
    outcomes.forEach((o, j) => {
      const c = batch[j]!
      if (o.headers.get('x-tollgate-cache') === 'hit') return
      counts.miss++
      made.set(o.id, { scope: callers[c.caller]!.scope, topic: c.topic, system: c.system, content: o.content })
    })
    outcomes.forEach((o, j) => {
      const c = batch[j]!
      const scope = callers[c.caller]!.scope
      const where = `case ${JSON.stringify(c)}`
      if (o.headers.get('x-tollgate-cache') !== 'hit') return
      const semantic = o.headers.get('x-tollgate-cache-match') === 'semantic'
      if (semantic) counts.semantic++
      else counts.exact++
      const origin = made.get(o.headers.get('x-tollgate-cache-origin-id') ?? '')
      if (origin === undefined) bad.push(`${where}: a hit replaying a reply no caller was sent`)
      else if (origin.scope !== scope) bad.push(`${where}: a hit replaying scope ${origin.scope}'s reply in ${scope}`)
      else if (origin.topic !== c.topic || origin.system !== c.system) bad.push(`${where}: another partition or topic`)
      else if (origin.content !== o.content) bad.push(`${where}: content not its origin's`)
      const similarity = Number(o.headers.get('x-tollgate-cache-similarity'))
      if (semantic && !(similarity >= THRESHOLD)) bad.push(`${where}: similarity ${similarity}`)
    })
  }
  t.same(bad.slice(0, 10), [], 'every hit replays a reply of its own scope, topic and system prompt')
  t.ok(counts.semantic > CASES / 10, `paraphrases hit (${JSON.stringify(counts)})`)
  t.ok(counts.miss >= callers.length * TOPICS, 'each scope missed on its own first')
}

t.test(`two owners, owner scope, embedded: ${CASES} cases (seed ${SEED})`, async (t) => {
  const gw = await startSemanticGateway({ store: 'embedded', embedder, semantic: { threshold: THRESHOLD } })
  t.teardown(() => gw.stop())
  const callers = []
  for (const owner of ['sem-fuzz-alice', 'sem-fuzz-bob']) {
    const { key } = await gw.createKey({ tier: 'Standard4000', owner })
    callers.push({ scope: owner, client: sdkClient(gw, key) })
  }
  await run(t, callers)
})

t.test(`two keys of one owner, key scope, Redis: ${CASES} cases (seed ${SEED})`, async (t) => {
  const { prefix } = testNamespace(t, 'fuzz-semcache', 'fuzz-semcache-test').fresh()
  const gw = await startSemanticGateway({
    store: 'redis',
    redis: onSharedRedis(prefix),
    embedder,
    semantic: { threshold: THRESHOLD },
    cache: { scope: 'key' },
  })
  t.teardown(() => gw.stop())
  const callers = []
  for (const name of ['first', 'second']) {
    const { key, id } = await gw.createKey({ tier: 'Standard4000', owner: 'sem-fuzz-carol', name })
    callers.push({ scope: id, client: sdkClient(gw, key) })
  }
  await run(t, callers)
})
