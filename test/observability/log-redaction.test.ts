// The log's redaction: what pino's paths did before, wildcards included, on a real logger.
import { Writable } from 'node:stream'
import t from 'tap'
import { createLogger } from '../../src/observability/logger.ts'
import { censorFields } from '../../src/observability/log-redaction.ts'

function capture(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>)
      done()
    },
  })
  return { lines, stream }
}

t.test('credentials never reach the log, wherever they sit', async (t) => {
  const { lines, stream } = capture()
  const log = createLogger('info', stream)
  log.info(
    {
      req: { headers: { authorization: 'Bearer a', cookie: 'c', 'x-api-key': 'x', 'api-key': 'k', accept: '*/*' } },
      headers: { authorization: 'Bearer b', cookie: 'c', 'api-key': 'k', host: 'h' },
      upstream: { authorization: 'Bearer c', 'api-key': 'k', url: 'u' },
      key: 'sk-1',
      secret: 's',
      token: 't',
      password: 'p',
      status: 200,
    },
    'x',
  )
  const line = lines[0] ?? {}
  t.same(line.req, {
    headers: {
      authorization: '[redacted]',
      cookie: '[redacted]',
      'x-api-key': '[redacted]',
      'api-key': '[redacted]',
      accept: '*/*',
    },
  })
  t.same(line.headers, { authorization: '[redacted]', cookie: '[redacted]', 'api-key': '[redacted]', host: 'h' })
  t.same(line.upstream, { authorization: '[redacted]', 'api-key': '[redacted]', url: 'u' })
  for (const field of ['key', 'secret', 'token', 'password']) t.equal(line[field], '[redacted]', field)
  t.equal(line.status, 200)
})

t.test("a child's bindings and an error's fields are censored too, the error still logged as one", async (t) => {
  const { lines, stream } = capture()
  const child = createLogger('info', stream).child({ upstream: { authorization: 'Bearer z', id: 1 } })
  const err = Object.assign(new TypeError('boom'), { authorization: 'Bearer e', code: 'E1' })
  child.error({ err }, 'failed')
  const line = lines[0] ?? {}
  t.same(line.upstream, { authorization: '[redacted]', id: 1 })
  const logged = line.err as Record<string, unknown>
  t.equal(logged.type, 'TypeError')
  t.equal(logged.message, 'boom')
  t.equal(logged.code, 'E1')
  t.equal(logged.authorization, '[redacted]')
  t.match(logged.stack, /TypeError: boom/)
  t.equal(err.authorization, 'Bearer e', "the caller's error is left as it was")
})

t.test('a line with nothing to hide is passed on as it is, not copied', async (t) => {
  const fields = { method: 'POST', status: 200, nested: { ok: true } }
  t.equal(censorFields(fields), fields)
  const withSecret = { a: 1, h: { authorization: 'x' } }
  const out = censorFields(withSecret)
  t.not(out, withSecret)
  t.same(withSecret.h, { authorization: 'x' }, "the caller's object is left as it was")
})
