// Two tabs refreshing with the same refresh token at once must not lose the session: a
// repeat within ragAuth.refreshReuseSeconds gets the very same new pair. A reuse after the
// window, or of a token whose successor was already used, is still a theft and ends the
// session. On the embedded store, and on Redis with the repeats spread over two instances.
import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import type { RunningTollgate } from '../helpers/gateway.ts'
import { redisMissing, redisNamespace } from '../keys/redis-namespace.ts'
import { call, createUser, login, me, type Pair, authGateway, type SharedRedis } from './helpers.ts'

const REUSE_SECONDS = 1
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`

const refresh = (url: string, token: string) =>
  call(url, 'POST', '/api/v1/auth/refresh', { body: { refresh_token: token } })

const gateway = (t: Test, redis?: SharedRedis): Promise<RunningTollgate> =>
  authGateway(t, {
    adminToken: ADMIN_TOKEN,
    config: (doc) => {
      doc.ragAuth = { refreshReuseSeconds: REUSE_SECONDS }
    },
    redis,
  })

/** The behaviour on gateways sharing one store (one gateway, or two on one Redis). */
function reuseWindow(t: Test, name: string, gateways: () => Promise<readonly RunningTollgate[]>): void {
  t.test(name, async (t) => {
    const gws = await gateways()
    const first = gws[0]
    if (first === undefined) throw new Error('no gateway')
    const url = (i: number): string => (gws[i % gws.length] ?? first).url
    let users = 0
    const freshPair = async (): Promise<Pair> => {
      const username = `tabs-${++users}-${randomBytes(3).toString('hex')}`
      await createUser(first, { username, password: `${username} password` })
      return login(first.url, username, `${username} password`)
    }

    t.test('20 refreshes with one token at once all succeed with the same new pair', async (t) => {
      const p = await freshPair()
      const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => refresh(url(i), p.refresh_token)))
      t.strictSame(
        replies.map((r) => r.status),
        Array<number>(20).fill(200),
        'none refused',
      )
      const pairs = new Set(replies.map((r) => JSON.stringify([r.json.access_token, r.json.refresh_token])))
      t.equal(pairs.size, 1, 'one pair, the same for all')
      const pair = replies[0]?.json as unknown as Pair
      t.not(pair.refresh_token, p.refresh_token)
      t.match(pair.refresh_token, /^rt_[\w-]{43}\.usr_[0-9a-f]{24}$/)
      for (let i = 0; i < gws.length; i++)
        t.equal((await me(url(i), pair.access_token)).status, 200, `the session lives (instance ${i})`)
      // The pair goes on as any other: its refresh token rotates once more.
      const onward = await refresh(url(1), pair.refresh_token)
      t.equal(onward.status, 200)
      t.equal((await me(url(0), String(onward.json.access_token))).status, 200)
    })

    t.test('a reuse after the window is a theft: the session ends', async (t) => {
      const p = await freshPair()
      const spentAt = performance.now()
      const first = await refresh(url(0), p.refresh_token)
      t.equal(first.status, 200)
      // Used again and again until the window has passed: a repeat answers the same pair,
      // the first reuse after it is refused (at most 5 s of tries, 50 ms apart).
      let repeats = 0
      let late: Awaited<ReturnType<typeof refresh>> | undefined
      for (let i = 0; i < 100 && late === undefined; i++) {
        const again = await refresh(url(i + 1), p.refresh_token)
        if (again.status !== 200) {
          late = again
          break
        }
        t.equal(again.json.refresh_token, first.json.refresh_token, 'a repeat within the window: the same pair')
        repeats++
        await new Promise((done) => setTimeout(done, 50))
      }
      const afterMs = performance.now() - spentAt
      t.ok(late !== undefined, 'refused in the end')
      t.equal(late?.status, 401)
      t.strictSame(late?.json, { detail: 'Invalid or expired refresh token' })
      t.ok(
        afterMs >= REUSE_SECONDS * 1000,
        `refused only after the window (${afterMs.toFixed(0)} ms, ${repeats} repeats before)`,
      )
      t.ok(repeats >= 1, 'at least one repeat within the window')
      const pair = first.json as unknown as Pair
      t.equal((await refresh(url(0), pair.refresh_token)).status, 401, 'the successor is dead')
      const gone = await me(url(1), pair.access_token)
      t.equal(gone.status, 401, 'and its access token')
    })

    t.test('within the window, a token whose successor was used is a theft', async (t) => {
      const p = await freshPair()
      const first = await refresh(url(0), p.refresh_token)
      const next = first.json as unknown as Pair
      const second = await refresh(url(1), next.refresh_token)
      t.equal(second.status, 200, 'the successor is used')
      const stolen = await refresh(url(0), p.refresh_token)
      t.equal(stolen.status, 401, 'the first token again: refused')
      t.equal(
        (await refresh(url(1), String(second.json.refresh_token))).status,
        401,
        'the newest refresh token is dead too',
      )
      t.equal((await me(url(0), String(second.json.access_token))).status, 401)
    })
  })
}

reuseWindow(t, 'embedded store', async () => [await gateway(t)])

const ns = await redisNamespace(t)
if (!ns.up) {
  t.fail(redisMissing())
} else {
  const secret = `reuse-${randomBytes(16).toString('hex')}`
  reuseWindow(t, 'Redis, two instances', async () =>
    Promise.all([gateway(t, { prefix: ns.prefix, secret }), gateway(t, { prefix: ns.prefix, secret })]),
  )
}
