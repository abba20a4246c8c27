// What a single delivery does on the wire: the signature (the specification's test vector,
// and a receiver's independent check), the SSRF guard (addresses refused, in every form,
// unless allowed; a host name resolved and the connection made to the address checked),
// no redirect followed, and the bounds on time and answer size.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { badRange, createAddressGuard } from '../../src/webhooks/address-guard.ts'
import { sendWebhook } from '../../src/webhooks/send.ts'
import { generateSecret, sign, signedHeaders } from '../../src/webhooks/signing.ts'
import { startWebhookReceiver, verifyStandardWebhook } from '../helpers/webhook-receiver.ts'

const LIMITS = { connectTimeoutMs: 2000, timeoutMs: 3000, maxResponseBytes: 1024 }

t.test('signatures are those of the Standard Webhooks specification', async (t) => {
  // The specification's published test vector.
  t.equal(
    sign('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}'),
    'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  )
  const secret = generateSecret()
  t.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/, '32 random bytes')
  t.not(generateSecret(), secret)
  const now = Math.floor(Date.now() / 1000)
  const body = '{"id":"evt_1","type":"key.created"}'
  const headers = signedHeaders(secret, 'evt_1', now, body)
  t.equal(verifyStandardWebhook(secret, headers, body, now), null, 'the receiver accepts it')
  t.equal(verifyStandardWebhook(secret, headers, `${body} `, now), 'no signature matches', 'a changed body is refused')
  t.equal(verifyStandardWebhook(generateSecret(), headers, body, now), 'no signature matches', 'another secret')
  t.equal(
    verifyStandardWebhook(secret, headers, body, now + 301),
    'timestamp out of tolerance',
    'a replay five minutes later is refused',
  )
  t.equal(
    verifyStandardWebhook(secret, { ...headers, 'webhook-id': 'evt_2' }, body, now),
    'no signature matches',
    'the id is signed',
  )
})

t.test('the guard refuses internal addresses in every form, unless allowed', async (t) => {
  const guard = createAddressGuard()
  const refused = [
    '127.0.0.1',
    '127.255.0.9',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fe80::1',
    'fe80::1%eth0',
    'fc00::1',
    'fd12:3456::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '::ffff:10.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '::127.0.0.1',
    '0:0:0:0:0:ffff:c0a8:0101',
  ]
  for (const address of refused) t.not(guard.refusal(address), null, `${address} refused`)
  t.match(guard.refusal('169.254.169.254'), /link-local/)
  t.match(guard.refusal('::ffff:127.0.0.1'), /loopback/, 'a mapped address is judged as the IPv4 it carries')
  for (const address of ['8.8.8.8', '1.1.1.1', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])
    t.equal(guard.refusal(address), null, `${address} allowed`)
  t.not(guard.refusal('example.com'), null, 'a name is no address')

  const allowing = createAddressGuard(['127.0.0.1', '10.0.0.0/8', '::1', '::ffff:192.168.0.0/112'])
  t.equal(allowing.refusal('127.0.0.1'), null)
  t.equal(allowing.refusal('::ffff:127.0.0.1'), null, 'the mapped form of an allowed address')
  t.not(allowing.refusal('127.0.0.2'), null, 'only what is allowed')
  t.equal(allowing.refusal('10.200.3.4'), null)
  t.equal(allowing.refusal('::1'), null)
  t.equal(allowing.refusal('192.168.7.7'), null, 'an IPv4 range written as mapped IPv6')
  t.not(allowing.refusal('172.16.0.1'), null, 'a private range not allowed stays refused')
  t.equal(badRange(['127.0.0.1', '10.0.0.0/8']), null)
  t.equal(badRange(['10.0.0.0/33']), '10.0.0.0/33')
  t.equal(badRange(['localhost']), 'localhost')
  t.throws(() => createAddressGuard(['nope']))
})

async function plainServer(handler: Parameters<typeof createServer>[1]): Promise<{ server: Server; port: number }> {
  const server = createServer(handler)
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', () => done()))
  return { server, port: (server.address() as AddressInfo).port }
}

const closing = (server: Server): Promise<void> =>
  new Promise((done) => {
    server.close(() => done())
    server.closeAllConnections()
  })

t.test('a delivery to loopback is refused unless allowed, by address and by name', async (t) => {
  const secret = generateSecret()
  const receiver = await startWebhookReceiver(secret)
  t.teardown(() => receiver.close())
  const body = '{"id":"evt_x"}'
  const request = {
    url: receiver.url,
    headers: signedHeaders(secret, 'evt_x', Math.floor(Date.now() / 1000), body),
    body,
  }
  const byAddress = await sendWebhook(request, createAddressGuard(), LIMITS)
  t.equal(byAddress.status, null)
  t.match(byAddress.error, /^refused: 127\.0\.0\.1 is a loopback address/)
  const byName = await sendWebhook(
    { ...request, url: `http://localhost:${receiver.port}/hook` },
    createAddressGuard(),
    LIMITS,
  )
  t.equal(byName.status, null)
  t.match(byName.error, /^refused: localhost resolves to .* loopback/)
  const mapped = await sendWebhook(
    { ...request, url: `http://[::ffff:127.0.0.1]:${receiver.port}/hook` },
    createAddressGuard(),
    LIMITS,
  )
  t.match(mapped.error, /^refused: .*loopback/)
  t.equal(receiver.received.length, 0, 'nothing reached the receiver')

  const allowed = await sendWebhook(request, createAddressGuard(['127.0.0.1']), LIMITS)
  t.same([allowed.status, allowed.error], [204, null])
  t.equal(receiver.received.length, 1)
  t.equal(receiver.received[0]?.problem, null, 'it verifies')

  // localhost resolves to ::1 and 127.0.0.1; only 127.0.0.1 is allowed, and the
  // connection goes to the address that passed (the receiver listens on 127.0.0.1 only).
  const named = await sendWebhook(
    { ...request, url: `http://localhost:${receiver.port}/hook` },
    createAddressGuard(['127.0.0.1']),
    LIMITS,
  )
  t.same([named.status, named.error], [204, null])
  t.equal(receiver.received.length, 2)
})

t.test('a redirect is not followed; it is a failed attempt', async (t) => {
  const target = await startWebhookReceiver('')
  const redirecting = await startWebhookReceiver('')
  redirecting.mode = { kind: 'redirect', location: target.url }
  t.teardown(async () => {
    await target.close()
    await redirecting.close()
  })
  const result = await sendWebhook(
    { url: redirecting.url, headers: {}, body: '{}' },
    createAddressGuard(['127.0.0.1']),
    LIMITS,
  )
  t.equal(result.status, 302)
  t.match(result.error, /^redirect not followed \(302 to http:\/\/127\.0\.0\.1:\d+\/hook\)/)
  t.equal(redirecting.received.length, 1)
  t.equal(target.received.length, 0, 'the redirect target got nothing')
})

t.test('the answer is bounded in time and in bytes; a non-2xx is a failure', async (t) => {
  const guard = createAddressGuard(['127.0.0.1'])
  const silent = await plainServer(() => undefined)
  const huge = await plainServer((_req, res) => {
    res.writeHead(200)
    const chunk = Buffer.alloc(64 * 1024, 'x')
    let sent = 0
    const more = (): void => {
      while (sent < 64 && res.write(chunk)) sent++
      if (sent >= 64) res.end()
      else res.once('drain', more)
    }
    more()
  })
  const failing = await plainServer((_req, res) => res.writeHead(500).end('no'))
  t.teardown(async () => {
    await closing(silent.server)
    await closing(huge.server)
    await closing(failing.server)
  })
  const started = Date.now()
  const slow = await sendWebhook({ url: `http://127.0.0.1:${silent.port}/`, headers: {}, body: '{}' }, guard, {
    ...LIMITS,
    timeoutMs: 300,
  })
  t.same([slow.status, slow.error], [null, 'no answer within 300 ms'])
  t.ok(Date.now() - started < 2000, 'given up on time')
  const big = await sendWebhook({ url: `http://127.0.0.1:${huge.port}/`, headers: {}, body: '{}' }, guard, LIMITS)
  t.same([big.status, big.error], [200, null], '4 MiB offered, 1 KiB read: the status counts')
  const bad = await sendWebhook({ url: `http://127.0.0.1:${failing.port}/`, headers: {}, body: '{}' }, guard, LIMITS)
  t.same([bad.status, bad.error], [500, 'answered 500'])
  const refused = await sendWebhook({ url: 'http://127.0.0.1:1/', headers: {}, body: '{}' }, guard, LIMITS)
  t.equal(refused.status, null)
  t.match(refused.error, /ECONNREFUSED/)
  const scheme = await sendWebhook({ url: 'file:///etc/passwd', headers: {}, body: '{}' }, guard, LIMITS)
  t.equal(scheme.error, 'refused: only http and https')
})
