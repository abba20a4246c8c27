// A client that leaves while its call waits for the upstream is a client's doing: the call is
// recorded as client_closed (499, nginx's "client closed request") at info level, not as a 504
// upstream_timeout at error level, which is what an operator's error alerts read. The fuzz
// found it: a pipelined case whose connection the runner closed early made an error line.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { startTollgate } from '../helpers/gateway.ts'
import { pollUntil } from '../helpers/poll.ts'

const CHAT = 'Mistral-Small-24B-Instruct-2501'

t.test('a client that leaves before the upstream answers: 499 client_closed, logged at info', async (t) => {
  // An upstream that never answers (and holds no timer): only the client's leaving ends the call.
  let arrived = 0
  const upstream = http.createServer(() => {
    arrived++
  })
  await new Promise<void>((listening) => upstream.listen(0, '127.0.0.1', listening))
  t.teardown(() => {
    upstream.closeAllConnections()
    upstream.close()
  })
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`
  const gw = await startTollgate({
    config: (doc) => {
      doc.backends = { ...(doc.backends as object), up: { type: 'openai', baseUrl: upstreamUrl } }
      doc.resourceBackend = 'up'
      for (const model of doc.models as Array<{ name: string; deployments: unknown[] }>)
        if (model.name === CHAT) model.deployments = [{ backend: 'up' }]
    },
  })
  t.teardown(() => gw.stop())
  const { key } = await gw.createKey({})

  const calls: Array<{ path: string; method: string; body?: string }> = [
    {
      path: '/v2/chat/completions',
      method: 'POST',
      body: JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'hi' }] }),
    },
    { path: '/v2/files', method: 'GET' },
  ]
  for (const [i, call] of calls.entries()) {
    const req = http.request(`${gw.url}${call.path}`, {
      method: call.method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    })
    req.on('error', () => undefined)
    req.end(call.body)
    const reached = await pollUntil(
      async () => arrived,
      (n) => n > i,
    )
    t.ok(reached.met, `${call.method} ${call.path} reached the upstream`)
    req.destroy()
    const logged = await pollUntil(
      async () => gw.logs().filter((l) => l.msg === 'request' && l.path === call.path),
      (lines) => lines.length > 0,
    )
    t.match(
      logged.value[0],
      { level: 30, status: 499, aborted: true, error: 'client_closed' },
      `${call.method} ${call.path}: one info line, 499 client_closed`,
    )
  }
  t.same(
    gw.logs().filter((l) => Number(l.level) >= 50),
    [],
    'no error-level line',
  )
})
