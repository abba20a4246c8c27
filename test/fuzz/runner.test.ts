// The fuzz property can fail: against a server that misbehaves in each way it looks for,
// the runner reports each one, and nothing against the route that behaves.
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { runFuzz } from './runner.ts'
import type { FuzzContext, FuzzTarget } from './targets.ts'

const PLAIN = { framing: 0, headers: 0, url: 0, method: 0, version: 0, auth: 0, pipeline: 0 }
const ctx: FuzzContext = { credentials: {}, models: {}, ids: {}, secrets: ['super-secret-token'] }
const target = (path: string, errors: FuzzTarget['errors'] = 'openai'): FuzzTarget => ({
  name: path,
  method: 'GET',
  path,
  auth: 'none',
  body: 'none',
  errors,
})

t.test('each way a reply can break the property is reported', async (t) => {
  const server = createServer((req, res) => {
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body))
    }
    const error = { error: { message: 'no', type: 'invalid_request_error', param: null, code: 'no' }, detail: 'no' }
    switch (req.url?.split('?')[0]) {
      case '/ok':
        json(200, { fine: true })
        break
      case '/refusal':
        json(404, error)
        break
      case '/no-detail':
        json(404, { error: error.error })
        break
      case '/other-detail':
        json(404, { ...error, detail: 'something else' })
        break
      case '/fastapi':
        json(404, { detail: 'Not Found' })
        break
      case '/crash':
        json(500, error)
        break
      case '/stack':
        json(400, {
          error: { ...error.error, message: 'TypeError: x is undefined\n    at handler (/srv/app/src/x.ts:10:5)' },
        })
        break
      case '/secret':
        json(400, { error: { ...error.error, message: 'token super-secret-token is wrong' } })
        break
      case '/bare':
        res.writeHead(404)
        res.end('Not Found')
        break
      case '/shape':
        json(404, { message: 'not found' })
        break
      case '/page':
        res.writeHead(404, { 'content-type': 'text/html; charset=utf-8' })
        res.end('<!doctype html><p>Not found</p>')
        break
      case '/home':
        res.writeHead(303, { location: '/portal/sign-in' })
        res.end()
        break
      case '/offsite':
        res.writeHead(303, { location: '//evil.example/portal' })
        res.end()
        break
      case '/backslash':
        res.writeHead(302, { location: '/\\evil.example' })
        res.end()
        break
      case '/nowhere':
        res.writeHead(303)
        res.end()
        break
      case '/anthropic-error':
        json(429, { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' }, request_id: 'r' })
        break
      case '/anthropic-message':
        json(200, { type: 'message', role: 'assistant', content: [], usage: { input_tokens: 1, output_tokens: 1 } })
        break
      case '/anthropic-stream':
      case '/chat-stream':
      case '/cut-stream': {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        const start = 'event: message_start\ndata: {"type":"message_start"}\n\n'
        if (req.url?.startsWith('/chat-stream')) res.end('data: {"object":"chat.completion.chunk"}\n\ndata: [DONE]\n\n')
        else if (req.url?.startsWith('/cut-stream')) res.end(start)
        else res.end(`${start}event: message_stop\ndata: {"type":"message_stop"}\n\n`)
        break
      }
      case '/close':
        req.socket.destroy()
        break
      case '/hang':
        break
    }
  })
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const port = (server.address() as AddressInfo).port
  const run = async (path: string, errors: FuzzTarget['errors'] = 'openai'): Promise<string[]> =>
    (
      await runFuzz({ port, targets: [target(path, errors)], ctx, mix: PLAIN, cases: 3, seed: 1, deadlineMs: 500 })
    ).failures.map((f) => f.problem)

  t.same(await run('/ok'), [], 'a success passes')
  t.same(await run('/refusal'), [], 'an OpenAI-shaped refusal with its detail passes')
  t.match(await run('/no-detail'), [/not in the openai error shape/], 'one without the detail does not')
  t.match(await run('/other-detail'), [/not in the openai error shape/], 'nor one whose detail says something else')
  t.same(await run('/fastapi', 'fastapi'), [], 'a FastAPI-shaped one passes where that is the shape')
  t.match(await run('/fastapi'), [/not in the openai error shape/], "but not where OpenAI's is")
  t.same(await run('/page', 'html'), [], 'an HTML page passes where that is the shape')
  t.same(await run('/home', 'html'), [], 'so does a redirect within the site')
  t.match(await run('/page'), [/body is not JSON/], "but a page is not OpenAI's shape")
  t.match(await run('/refusal', 'html'), [/not an HTML page/], 'nor JSON a page')
  t.match(await run('/offsite', 'html'), [/to another site/])
  t.match(await run('/backslash', 'html'), [/to another site/])
  t.match(await run('/nowhere', 'html'), [/without a Location/])
  t.match(await run('/crash'), [/status 500/])
  t.match(await run('/stack'), [/holds (a stack frame|a source position|a JavaScript error message)/])
  t.match(await run('/secret'), [/holds a secret/])
  t.match(await run('/bare'), [/body is not JSON/])
  t.match(await run('/shape'), [/not in the openai error shape/])
  t.same(await run('/anthropic-error', 'anthropic'), [], "Anthropic's error passes where that is the shape")
  t.match(await run('/refusal', 'anthropic'), [/not in the anthropic error shape/], "OpenAI's does not there")
  t.match(await run('/anthropic-error'), [/not in the openai error shape/], "nor Anthropic's where OpenAI's is")
  t.same(await run('/anthropic-message', 'anthropic'), [], 'a Message passes')
  t.same(await run('/anthropic-stream', 'anthropic'), [], "so does a stream of Anthropic's events")
  t.match(await run('/ok', 'anthropic'), [/not an Anthropic message/], 'a success that is no Message does not')
  t.match(await run('/chat-stream', 'anthropic'), [/does not begin with message_start/], 'nor a chat stream')
  t.match(await run('/cut-stream', 'anthropic'), [/does not end with message_stop/], 'nor a stream cut short')
  t.match(await run('/close'), [/closed without a reply/])
  t.match(await run('/hang'), [/no reply within 500 ms/])
})
