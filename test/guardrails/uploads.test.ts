// Guardrails on uploaded JSONL and on a batch's lines, on a running gateway through the
// official openai SDK (files on the built-in mock's file store, the chat model behind a
// recording upstream): a batch or fine-tuning file with a blocked (or masked: a file is
// never masked) match is refused at upload with guardrail_blocked naming the line, the
// detector and where, never the text, and is not stored; a flagged one is stored and
// recorded (object `upload`); other purposes are not read. A batch's line is checked again
// when it runs, under the policy in force then: a masked line reaches the upstream masked,
// a blocked line fails alone, with nothing sent.
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI, { toFile } from 'openai'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { untilBatch } from '../helpers/batches.ts'
import { startFakeUpstream } from '../helpers/fake-upstream.ts'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'
import { sdkClient } from '../helpers/sdk-gateway.ts'

const MODEL = 'Mistral-Small-24B-Instruct-2501'
const CARD = '4111 1111 1111 1111'
const EMAIL = 'erika.mustermann@example.de'
const TAX_ID = '86095742719'

const upstream = await startFakeUpstream()
t.teardown(() => upstream.close())
const plans = parse(readFileSync(join(import.meta.dirname, '../../config/plans.yaml'), 'utf8')) as {
  tiers: Record<string, Record<string, unknown>>
}
plans.tiers.Standard4000!.guardrails = 'lenient'
const policies = {
  lenient: { detectors: { email: 'flag', card: 'flag', de_tax_id: 'flag' } },
  gdpr: { detectors: { email: 'mask', card: 'block', de_tax_id: 'flag' } },
}
const gw = await startTollgate({
  config: (doc) => {
    doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstream.url } }
    for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
      if (model.name === MODEL) model.deployments = [{ backend: 'up' }]
    doc.plans = plans
    doc.guardrails = { policies }
  },
})
t.teardown(() => gw.stop())
const admin = { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' }
const { key, id: keyId } = await gw.createKey({ tier: 'Standard4000' })
const client = sdkClient(gw, key)

/** The tier's policy becomes `name`, by a reload of the file. */
async function tierPolicy(name: string): Promise<void> {
  const doc = parse(readFileSync(gw.configPath, 'utf8')) as { plans: typeof plans }
  doc.plans.tiers.Standard4000!.guardrails = name
  writeFileSync(gw.configPath, stringify(doc))
  const res = await fetch(`${gw.url}/admin/reload`, { method: 'POST', headers: admin })
  if (res.status !== 200) throw new Error(`reload: ${res.status} ${await res.text()}`)
}

const batchLine = (customId: string, content: string): string =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model: MODEL, messages: [{ role: 'user', content }], max_tokens: 8 },
  })

const upload = async (lines: string[], purpose: 'batch' | 'fine-tune' | 'assistants'): Promise<string> =>
  (await client.files.create({ file: await toFile(Buffer.from(lines.join('\n')), 'in.jsonl'), purpose })).id

async function refused(call: Promise<unknown>): Promise<{ status: number; body: unknown; message: string }> {
  try {
    await call
  } catch (err) {
    if (err instanceof OpenAI.APIError) return { status: err.status ?? 0, body: err.error, message: err.message }
    throw err
  }
  throw new Error('the upload was not refused')
}

const fileCount = async (): Promise<number> => (await client.files.list()).data.length

// Uploaded under `lenient` (every match only flagged), run under `gdpr`.
const ranLater = await upload(
  [batchLine('plain', 'hello'), batchLine('mail', `write to ${EMAIL}`), batchLine('card', `card ${CARD}`)],
  'batch',
)
await tierPolicy('gdpr')

t.test('a batch file with a blocked match is refused at upload: line, detector, where; never the text', async (t) => {
  const before = await fileCount()
  const out = await refused(upload([batchLine('a', 'hello'), batchLine('b', `pay with ${CARD}`)], 'batch'))
  t.equal(out.status, 400)
  t.match(out.body, { code: 'guardrail_blocked', param: 'file' })
  t.match(out.message, /policy 'gdpr'.*'card' check matched on line 2 at body\.messages\[0\]\.content/)
  t.notOk(out.message.includes('4111'), 'the match is not echoed')
  t.equal(await fileCount(), before, 'nothing was stored')
})

t.test('a mask refuses a file too: a stored file is never rewritten', async (t) => {
  const out = await refused(upload([batchLine('a', `mail ${EMAIL}`)], 'batch'))
  t.equal(out.status, 400)
  t.match(out.message, /'email' check \(a file is never masked: a mask refuses it\) matched on line 1/)
  t.notOk(out.message.includes(EMAIL))
})

t.test('a fine-tuning file: every string is training data, a completion too', async (t) => {
  const chat = await refused(
    upload(
      [
        JSON.stringify({
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
        }),
        JSON.stringify({
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: `card ${CARD}` },
          ],
        }),
      ],
      'fine-tune',
    ),
  )
  t.match(chat.message, /'card' check matched on line 2 at messages\[1\]\.content/)
  const legacy = await refused(upload([JSON.stringify({ prompt: 'pay', completion: `with ${CARD}` })], 'fine-tune'))
  t.match(legacy.message, /line 1 at completion/)
  const notJson = await refused(upload([`not json ${CARD}`], 'fine-tune'))
  t.match(notJson.message, /line 1 at line/, 'a line that is not JSON is read as text')
})

t.test('a flag lets a file through, recorded with its line; other purposes are not read', async (t) => {
  const id = await upload([batchLine('a', 'hello'), batchLine('b', `Steuer-ID ${TAX_ID}`)], 'batch')
  t.match(id, /^file-/)
  const { value: page } = await pollUntil(
    async () =>
      (await (await fetch(`${gw.url}/admin/audit?action=guardrail.flag&limit=100`, { headers: admin })).json()) as {
        data: Array<Record<string, unknown>>
      },
    (p) => p.data.some((e) => e.object_type === 'upload'),
  )
  const record = page.data.find((e) => e.object_type === 'upload')
  t.match(record, {
    actor: { type: 'key', id: keyId },
    after: {
      policy: 'gdpr',
      action: 'flag',
      endpoint: 'files.create',
      findings: [{ detector: 'de_tax_id', action: 'flag', path: 'body.messages[0].content', line: 2 }],
    },
  })
  t.notOk(JSON.stringify(page).includes(TAX_ID), 'the audit log never holds the text')
  t.match(await upload([`card ${CARD}`], 'assistants'), /^file-/, 'an assistants file is not a batch or training file')
})

t.test("a batch's lines are checked when they run: masked as sent, a block fails its line alone", async (t) => {
  const before = upstream.requests.length
  const batch = await client.batches.create({
    input_file_id: ranLater,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  })
  const done = await untilBatch(client, batch.id, (b) => b.status === 'completed' || b.status === 'failed')
  t.equal(done.status, 'completed')
  t.same(done.request_counts, { total: 3, completed: 2, failed: 1 })
  const sent = upstream.requests
    .slice(before)
    .map((r) => r.body.toString('utf8'))
    .join('\n')
  t.ok(sent.includes('write to [EMAIL_1]'), 'the masked line reached the upstream masked')
  t.notOk(sent.includes(EMAIL), 'the address never left')
  t.notOk(sent.includes('4111'), 'the card never left')
  const errors = (await (await client.files.content(done.error_file_id ?? '')).text())
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { custom_id: string; error: { code: string; message: string } | null })
  t.equal(errors.length, 1)
  t.match(errors[0], { custom_id: 'card', error: { code: 'guardrail_blocked', message: /'card'/ } })
  t.notOk(JSON.stringify(errors).includes('4111'))
})
