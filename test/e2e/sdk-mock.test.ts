// The official openai SDK, pointed at a running Tollgate on its default configuration
// (the built-in mock backend), calls every /v2 endpoint.
import OpenAI from 'openai'
import t from 'tap'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { endpointTests } from './endpoints.ts'

let gw: RunningTollgate
let client: OpenAI
let key: string

t.before(async () => {
  gw = await startTollgate()
  key = (await gw.createKey({ name: 'sdk', tier: 'Standard4000' })).key
  client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v2`, maxRetries: 0 })
})
t.teardown(async () => {
  await gw.stop()
})

endpointTests(t, () => ({ gw, client, key }))
