// Brute force against logins, as an attacker tries it, without the attacker being able to
// lock the real user out: one address is refused (per username, and over all usernames);
// the username is only slowed, so the real user from an address of his own still gets in.
// The RAG login and the portal's sign-in count together. Two client addresses are made
// from loopback with a trusted proxy hop and X-Forwarded-For.
import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { form } from '../portal/helpers.ts'
import { call, createUser, type Reply, authGateway, type SharedRedis } from './helpers.ts'

const THROTTLE = {
  maxFailuresPerUserAddress: 3,
  maxFailuresPerAddress: 5,
  maxFailuresPerUsername: 3,
  slowdownMs: 100,
  maxSlowdownMs: 400,
  windowSeconds: 60,
  blockSeconds: 120,
}
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`

const gateway = (t: Test, redis?: SharedRedis): Promise<RunningTollgate> =>
  authGateway(t, {
    adminToken: ADMIN_TOKEN,
    config: (doc) => {
      ;(doc.server as Record<string, unknown>).trustProxyHops = 1
      doc.ragAuth = { loginThrottle: THROTTLE }
    },
    redis,
  })

const from = (gw: RunningTollgate, address: string, username: string, password: string): Promise<Reply> =>
  call(gw.url, 'POST', '/api/v1/auth/user', { body: { username, password }, headers: { 'x-forwarded-for': address } })

/** The reply and how long it took (ms). */
async function timed<T>(run: () => Promise<T>): Promise<[T, number]> {
  const start = performance.now()
  const reply = await run()
  return [reply, performance.now() - start]
}

const gw = await gateway(t)
for (const username of ['victim', 'spread', 'bystander', 'resetter', 'burst', 'carol'])
  await createUser(gw, { username, password: `${username} password` })

t.test('an attacker failing 50 times at address A: A is throttled, the user at B logs in', async (t) => {
  const statuses: number[] = []
  let last: Reply | undefined
  for (let i = 0; i < 50; i++) {
    last = await from(gw, '10.0.0.66', 'victim', `guess ${i}`)
    statuses.push(last.status)
  }
  t.strictSame(
    statuses,
    [...Array<number>(3).fill(401), ...Array<number>(47).fill(429)],
    '3 checked (401), then refused unchecked (429)',
  )
  t.match(last?.json.detail, /Too many failed login attempts/)
  t.ok(Number(last?.headers.get('retry-after')) > 60, 'retry-after covers the block')
  t.equal(
    (await from(gw, '10.0.0.66', 'Victim', 'victim password')).status,
    429,
    'at A even the right password is refused (any case)',
  )

  const [real, ms] = await timed(() => from(gw, '10.0.0.77', 'victim', 'victim password'))
  t.equal(real.status, 200, 'the real user at B logs in')
  t.ok(ms < 5000, `at most slowed (${ms.toFixed(0)} ms)`)
  t.match(real.json, { token_type: 'bearer' })
})

t.test('guesses from many addresses slow the username down, never lock it', async (t) => {
  const waits: number[] = []
  for (let i = 1; i <= 8; i++) {
    const [reply, ms] = await timed(() => from(gw, `10.3.0.${i}`, 'spread', 'guess'))
    t.equal(reply.status, 401, `guess ${i} from its own address: checked, not refused`)
    waits.push(ms)
  }
  // Failures 4, 5, 6 wait 100, 200, 400 ms; from then on 400 (maxSlowdownMs).
  t.ok(
    waits.slice(5).every((ms) => ms >= 400),
    `the later guesses waited at least maxSlowdownMs (${waits.map((w) => w.toFixed(0)).join(', ')} ms)`,
  )
  const [real, ms] = await timed(() => from(gw, '10.3.1.1', 'spread', 'spread password'))
  t.equal(real.status, 200, 'the real user logs in')
  t.ok(ms >= 400 && ms < 5000, `after the slowdown (${ms.toFixed(0)} ms)`)
})

t.test('one address failing on many usernames is refused for all of them; its neighbour is not', async (t) => {
  for (let i = 1; i <= 5; i++) t.equal((await from(gw, '10.9.9.9', `spray-${i}`, 'guess')).status, 401)
  t.equal((await from(gw, '10.9.9.9', 'bystander', 'bystander password')).status, 429, 'the address is refused')
  t.equal((await from(gw, '10.9.9.8', 'bystander', 'bystander password')).status, 200, 'a neighbour address is not')
})

t.test('a right password clears the (username, address) count', async (t) => {
  // Two rounds of two failures: four in all, past the pair's three unless the success between cleared them.
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 2; i++) t.equal((await from(gw, '10.1.0.1', 'resetter', 'guess')).status, 401)
    t.equal((await from(gw, '10.1.0.1', 'resetter', 'resetter password')).status, 200, `round ${round}: not refused`)
  }
})

t.test('a burst of parallel guesses from one address: only the allowance is checked', async (t) => {
  const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => from(gw, '10.2.0.1', 'burst', `guess ${i}`)))
  t.strictSame(
    replies.map((r) => r.status).sort(),
    [...Array<number>(3).fill(401), ...Array<number>(17).fill(429)],
    '3 checked (401), 17 refused unchecked (429)',
  )
  t.equal((await from(gw, '10.2.0.2', 'burst', 'burst password')).status, 200, 'the user from elsewhere logs in')
})

t.test('the portal sign-in counts with the RAG login, and locks no one out either', async (t) => {
  const signIn = (address: string, password: string) =>
    fetch(`${gw.url}/portal/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
      body: form({ username: 'carol', password }),
    })
  for (let i = 0; i < 3; i++) t.equal((await signIn('10.4.0.1', 'wrong')).status, 401, `portal failure ${i + 1}`)
  const refused = await signIn('10.4.0.1', 'carol password')
  t.equal(refused.status, 429, "the attacker's address is refused, right password or not")
  t.ok(Number(refused.headers.get('retry-after')) > 0)
  t.equal((await from(gw, '10.4.0.1', 'carol', 'carol password')).status, 429, 'and on the RAG login: one count')
  const real = await signIn('10.4.0.2', 'carol password')
  t.equal(real.status, 303, 'carol signs in to the portal from her own address')
  t.equal((await from(gw, '10.4.0.2', 'carol', 'carol password')).status, 200, 'and logs in to the RAG gateway')
  const metrics = await (await fetch(`${gw.metricsUrl}/metrics`)).text()
  t.match(metrics, /tollgate_rag_logins_total\{outcome="throttled"\} \d+/)
})

const ns = await redisNamespace(t)
if (!ns.up) {
  t.fail(redisMissing())
} else {
  t.test('on Redis, two instances count together', async (t) => {
    const secret = `throttle-${randomBytes(16).toString('hex')}`
    const [a, b] = await Promise.all([
      gateway(t, { prefix: ns.prefix, secret }),
      gateway(t, { prefix: ns.prefix, secret }),
    ])
    await createUser(a, { username: 'shared', password: 'shared password' })
    const statuses: number[] = []
    for (let i = 0; i < 10; i++)
      statuses.push((await from(i % 2 === 0 ? a : b, '10.5.0.66', 'shared', `guess ${i}`)).status)
    t.strictSame(
      statuses,
      [...Array<number>(3).fill(401), ...Array<number>(7).fill(429)],
      'the allowance is for both instances together',
    )
    t.equal((await from(b, '10.5.0.77', 'shared', 'shared password')).status, 200, 'the user at B logs in on B')
    t.equal((await from(a, '10.5.0.77', 'shared', 'shared password')).status, 200, 'and on A')
    t.equal(
      (await from(b, '10.5.0.66', 'shared', 'shared password')).status,
      429,
      "the attacker's address stays refused",
    )
  })
}
