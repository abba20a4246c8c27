// The official openai SDK's files and vector-store methods, pointed at a running Tollgate
// on its default configuration: the built-in mock implements /v1 for real.
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { v1Tests, type V1Subject } from './v1-endpoints.ts'

let subject: V1Subject

t.before(async () => {
  const gw = await startTollgate()
  const { key, id } = await gw.createKey({ name: 'v1', tier: 'Standard4000' })
  subject = {
    gw,
    key,
    keyId: id,
    client: new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 }),
    v2: new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 }),
  }
})
t.teardown(async () => {
  await subject.gw.stop()
})

v1Tests(t, () => subject)
