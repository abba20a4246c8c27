// x-tollgate-max-wait-ms where it means something and where it does not (docs/queue.md,
// "Deadlines"): a drop-in /queue call (its OpenAI and Anthropic twins) waits in a line, so a
// value that is not a whole number of ms is refused with 400 invalid_header before anything
// is admitted; everywhere else nothing waits on it (/v2, /v1/messages, a stored request with
// Prefer: respond-async, a list of models), so the header is ignored and the call is served
// as if it had not been sent, whatever its value.
import t from 'tap'
import { request, type RawResponse } from '../helpers/http.ts'
import { ASYNC, chatBody, embeddedGateway, post } from './helpers.ts'

const gw = await embeddedGateway(t)
const { key } = await gw.createKey({ name: 'max-wait', tier: 'Standard1000' })
const BAD = ['soon', '-1', '1.5', '']

const anthropic = (path: string, headers: Record<string, string>): Promise<RawResponse> =>
  request(`${gw.url}${path}`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'anthropic-version': '2023-06-01', 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'claude-sonnet-4.5', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }),
  })

t.test('a drop-in /queue call refuses a bad value with 400 invalid_header, on both of its APIs', async (t) => {
  for (const bad of BAD) {
    const res = await post(`${gw.url}/queue/chat/completions`, key, chatBody('bad'), {
      'x-tollgate-max-wait-ms': bad,
    })
    t.equal(res.status, 400, `/queue/chat/completions, '${bad}'`)
    const error = res.json<{ error: { code: string; param: string } }>().error
    t.equal(error.code, 'invalid_header')
    t.equal(error.param, 'x-tollgate-max-wait-ms')
    const messages = await anthropic('/queue/v1/messages', { 'x-tollgate-max-wait-ms': bad })
    t.equal(messages.status, 400, `/queue/v1/messages, '${bad}'`)
    t.match(messages.json(), {
      type: 'error',
      error: { type: 'invalid_request_error', message: /x-tollgate-max-wait-ms/ },
    })
  }
  const good = await post(`${gw.url}/queue/chat/completions`, key, chatBody('good'), {
    'x-tollgate-max-wait-ms': '60000',
  })
  t.equal(good.status, 200, 'a whole number of ms is served')
})

t.test('where no call waits, the header is ignored whatever its value', async (t) => {
  for (const bad of BAD) {
    const header = { 'x-tollgate-max-wait-ms': bad }
    const v2 = await post(`${gw.url}/v2/chat/completions`, key, chatBody('v2'), header)
    t.equal(v2.status, 200, `/v2/chat/completions, '${bad}'`)
    const messages = await anthropic('/v1/messages', header)
    t.equal(messages.status, 200, `/v1/messages, '${bad}'`)
    const stored = await post(`${gw.url}/queue/chat/completions`, key, chatBody('stored'), { ...ASYNC, ...header })
    t.equal(stored.status, 202, `a stored request (respond-async), '${bad}'`)
    const models = await request(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${key}`, ...header } })
    t.equal(models.status, 200, `/v2/models, '${bad}'`)
  }
})
