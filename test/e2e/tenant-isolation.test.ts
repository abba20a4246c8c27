// Tenant isolation inside request bodies, driven as an attacker would: two tenants share one
// upstream account (an `openai` backend that is also the resource backend, the deployment the
// docs/security.md recommends), and a recording upstream proves that no call of the second tenant that
// names the first one's objects (a file, a vector store, a response, its items) in its body,
// its query or a multipart field ever reaches it. Each such call gets the 404 the direct route
// gives; an unknown id gets the same. The owner's own calls naming the same ids go through.
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import {
  startBehindUpstream,
  type BehindUpstream,
  type RunningTollgate,
  type UpstreamProcess,
} from '../helpers/gateway.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'
const UPSTREAM_KEY = 'upstream-secret-for-isolation'

interface Objects {
  readonly file: string
  readonly trainingFile: string
  readonly store: string
  readonly response: string
  readonly streamedResponse: string
  readonly item: string
}

let upstream: UpstreamProcess
let gw: RunningTollgate
let alice: { key: string; v1: OpenAI; v2: OpenAI }
let mallory: { key: string; v1: OpenAI; v2: OpenAI }
let objects: Objects

const clientsOf = (key: string) => ({
  key,
  v1: new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }),
  v2: new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 }),
})

let behind: BehindUpstream

t.before(async () => {
  behind = await startBehindUpstream({ upstreamKey: UPSTREAM_KEY, upstreamArgs: ['--record-bodies'], everyModel: true })
  ;({ gw, upstream } = behind)
  alice = clientsOf((await gw.createKey({ owner: 'alice', tier: 'Standard4000' })).key)
  mallory = clientsOf((await gw.createKey({ owner: 'mallory', tier: 'Standard4000' })).key)

  const file = (
    await alice.v1.files.create({
      file: await toFile(Buffer.from("alice's private notes"), 'notes.txt'),
      purpose: 'assistants',
    })
  ).id
  const trainingFile = (
    await alice.v2.files.create({
      file: await toFile(Buffer.from('{"messages":[]}\n'), 'train.jsonl'),
      purpose: 'fine-tune',
    })
  ).id
  const store = (await alice.v1.vectorStores.create({ name: 'alice', file_ids: [file] })).id
  const response = await alice.v2.responses.create({ model: CHAT, input: 'remember this', max_output_tokens: 4 })
  // A streamed response is remembered from its events.
  let streamedResponse = ''
  for await (const event of await alice.v2.responses.create({
    model: CHAT,
    input: 'and this',
    max_output_tokens: 4,
    stream: true,
  })) {
    // max_output_tokens cuts the mock's prose, so the stream ends "incomplete", as OpenAI's does.
    if (event.type === 'response.completed' || event.type === 'response.incomplete')
      streamedResponse = event.response.id
  }
  const item = response.output[0]?.id ?? ''
  objects = { file, trainingFile, store, response: response.id, streamedResponse, item }
})
t.teardown(async () => behind?.stop())

/** A call that names one of alice's objects, as raw HTTP so nothing is reshaped on the way. */
interface Attack {
  readonly name: string
  readonly method?: string
  readonly path: string
  readonly body?: (o: Objects) => unknown
  /** The id the body names (found in what reached the upstream if the check failed). */
  readonly names: (o: Objects) => string
  readonly headers?: Record<string, string>
}

const ATTACKS: readonly Attack[] = [
  {
    name: "file_search over another tenant's vector store",
    path: '/v2/responses',
    names: (o) => o.store,
    body: (o) => ({
      model: CHAT,
      input: 'what do the notes say?',
      tools: [{ type: 'file_search', vector_store_ids: [o.store] }],
    }),
  },
  {
    name: "an input_file part with another tenant's file",
    path: '/v2/responses',
    names: (o) => o.file,
    body: (o) => ({
      model: CHAT,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'summarise' },
            { type: 'input_file', file_id: o.file },
          ],
        },
      ],
    }),
  },
  {
    name: "a chat content part with another tenant's file",
    path: '/v2/chat/completions',
    names: (o) => o.file,
    body: (o) => ({
      model: CHAT,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: 'summarise' },
            { type: 'file', file: { file_id: o.file } },
          ],
        },
      ],
    }),
  },
  {
    name: 'previous_response_id of another tenant',
    path: '/v2/responses',
    names: (o) => o.response,
    body: (o) => ({ model: CHAT, input: 'go on', previous_response_id: o.response }),
  },
  {
    name: "previous_response_id of another tenant's streamed response",
    path: '/v2/responses',
    names: (o) => o.streamedResponse,
    body: (o) => ({ model: CHAT, input: 'go on', previous_response_id: o.streamedResponse }),
  },
  {
    name: "an item_reference to another tenant's output item",
    path: '/v2/responses',
    names: (o) => o.item,
    body: (o) => ({
      model: CHAT,
      input: [
        { type: 'item_reference', id: o.item },
        { role: 'user', content: 'repeat it' },
      ],
    }),
  },
  {
    name: "a code interpreter container with another tenant's file",
    path: '/v2/responses',
    names: (o) => o.file,
    body: (o) => ({
      model: CHAT,
      input: 'run',
      tools: [{ type: 'code_interpreter', container: { type: 'auto', file_ids: [o.file] } }],
    }),
  },
  {
    name: "a prompt variable with another tenant's file",
    path: '/v2/responses',
    names: (o) => o.file,
    body: (o) => ({
      model: CHAT,
      input: 'x',
      prompt: { id: 'pmpt_1', variables: { doc: { type: 'input_file', file_id: o.file } } },
    }),
  },
  {
    name: "a fine-tuning job on another tenant's training file",
    path: '/v2/fine_tuning/jobs',
    names: (o) => o.trainingFile,
    body: (o) => ({ model: CHAT, training_file: o.trainingFile }),
  },
  {
    name: "a vector store made of another tenant's file",
    path: '/v1/vector_stores',
    names: (o) => o.file,
    body: (o) => ({ name: 'mine now', file_ids: [o.file] }),
  },
  {
    name: 'the queue drop-in twin',
    path: '/queue/chat/completions',
    names: (o) => o.store,
    body: (o) => ({
      model: CHAT,
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'file_search', vector_store_ids: [o.store] }],
    }),
  },
  {
    name: 'a stored queue request',
    path: '/queue/chat/completions',
    headers: { prefer: 'respond-async' },
    names: (o) => o.file,
    body: (o) => ({
      model: CHAT,
      messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: o.file } }] }],
    }),
  },
  { name: "a list cursor at another tenant's file", method: 'GET', path: '/v1/files?after=FILE', names: (o) => o.file },
]

async function send(
  key: string,
  attack: Attack,
  o: Objects,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = attack.body?.(o)
  const res = await fetch(`${gw.url}${attack.path.replace('FILE', o.file)}`, {
    method: attack.method ?? 'POST',
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...attack.headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

t.test(
  "naming another tenant's object anywhere in a call is the direct route's 404, and nothing reaches the upstream",
  async (t) => {
    const direct = await fetch(`${gw.url}/v1/files/${objects.file}`, {
      headers: { authorization: `Bearer ${mallory.key}` },
    })
    t.equal(direct.status, 404, 'the direct route')
    const directError = ((await direct.json()) as { error: Record<string, unknown> }).error
    const before = (await upstream.requests()).length
    for (const attack of ATTACKS) {
      const reply = await send(mallory.key, attack, objects)
      t.equal(reply.status, 404, attack.name)
      const error = reply.body.error as Record<string, unknown>
      t.match(
        error,
        { type: directError.type, code: directError.code, message: /^No such [a-z -]+\.$/ },
        `${attack.name}: the contract's 404`,
      )
      t.notOk(JSON.stringify(reply.body).includes(attack.names(objects)), `${attack.name}: the id is not echoed`)
    }
    const reached = (await upstream.requests()).slice(before)
    const ids = Object.values(objects)
    const leaked = reached.filter((r) => ids.some((id) => r.path.includes(id) || r.body.includes(id)))
    t.same(
      leaked.map((r) => `${r.method} ${r.path}`),
      [],
      "no request naming alice's objects reached the upstream",
    )
  },
)

t.test("an unknown id gets the same answer as another tenant's", async (t) => {
  const unknown: Objects = {
    file: 'file-0000000000000000',
    trainingFile: 'file-0000000000000001',
    store: 'vs_0000000000',
    response: 'resp_0000000000',
    streamedResponse: 'resp_0000000001',
    item: 'msg_0000000000',
  }
  for (const attack of ATTACKS) {
    const foreign = await send(mallory.key, attack, objects)
    const missing = await send(mallory.key, attack, unknown)
    t.same({ status: missing.status, body: missing.body }, { status: foreign.status, body: foreign.body }, attack.name)
  }
})

t.test('a conversation, batch, container or skill cannot be named: the gateway hands none out', async (t) => {
  for (const [body, noun] of [
    [{ model: CHAT, input: 'x', conversation: 'conv_123' }, 'conversation'],
    [{ model: CHAT, input: 'x', conversation: { id: 'conv_123' } }, 'conversation'],
    [{ model: CHAT, input: 'x', tools: [{ type: 'code_interpreter', container: 'cntr_123' }] }, 'container'],
  ] as const) {
    const res = await fetch(`${gw.url}/v2/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice.key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    t.equal(res.status, 404)
    t.match(await res.json(), { error: { code: 'not_found', message: `No such ${noun}.` } })
  }
})

t.test('the owner names its own objects freely, through the SDK', async (t) => {
  const next = await alice.v2.responses.create({
    model: CHAT,
    input: 'go on',
    previous_response_id: objects.response,
    max_output_tokens: 4,
  })
  t.equal(next.previous_response_id, objects.response, 'previous_response_id of its own response')
  const streamedNext = await alice.v2.responses.create({
    model: CHAT,
    input: 'go on',
    previous_response_id: objects.streamedResponse,
    max_output_tokens: 4,
  })
  // Served, not refused; the 4-token limit cuts the reply, so the status is "incomplete".
  t.equal(streamedNext.status, 'incomplete', 'and of its own streamed one')
  const searched = await alice.v2.responses.create({
    model: CHAT,
    input: 'notes?',
    tools: [{ type: 'file_search', vector_store_ids: [objects.store] }],
    max_output_tokens: 4,
  })
  t.equal(searched.status, 'incomplete', 'file_search over its own store')
  const withItem = await alice.v2.responses.create({
    model: CHAT,
    input: [
      { type: 'item_reference', id: objects.item },
      { role: 'user', content: 'again' },
    ],
    max_output_tokens: 4,
  })
  t.equal(withItem.status, 'incomplete', 'an item_reference to its own item')
  // Another key of the same owner: the owner, not the key, owns.
  const second = clientsOf((await gw.createKey({ owner: 'alice', tier: 'Standard4000' })).key)
  const fromSecond = await second.v2.responses.create({
    model: CHAT,
    input: 'hi',
    previous_response_id: objects.response,
    max_output_tokens: 4,
  })
  t.equal(fromSecond.previous_response_id, objects.response, 'another key of the owner')
  const page = await alice.v1.files.list({ after: objects.file })
  t.ok(Array.isArray(page.data), 'a list cursor at its own file')
  const reached = await upstream.requests()
  t.ok(
    reached.some((r) => r.body.includes(objects.store)),
    'its own store reached the upstream',
  )
})
