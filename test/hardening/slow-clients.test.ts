// Clients that hold connections without doing anything useful: headers at a byte a
// second (slowloris), bodies that trickle or stop, and too many connections from one
// address. Each is bounded by a timeout or a cap, answered in the contract's error shape
// where it can still be, and none of it slows down anyone else.
import { connect, type Socket } from 'node:net'
import t, { type Test } from 'tap'
import { encodeMultipart } from '../helpers/multipart.ts'
import { startTollgate, type RunningTollgate } from '../helpers/gateway.ts'
import { ResponseReader, type ParsedResponse } from '../helpers/http-reader.ts'

const HEADERS_TIMEOUT_MS = 2000
const BODY_WINDOW_MS = 1000
const MIN_BYTES_PER_SECOND = 1024
const CAP = 40
const CHAT = 'Mistral-Small-24B-Instruct-2501'

let gw: RunningTollgate
let port: number
let key: string

t.before(async () => {
  gw = await startTollgate({
    config: (doc) =>
      Object.assign(doc.server as Record<string, unknown>, {
        headersTimeoutMs: HEADERS_TIMEOUT_MS,
        bodyRateWindowMs: BODY_WINDOW_MS,
        bodyMinBytesPerSecond: MIN_BYTES_PER_SECOND,
        maxConnectionsPerAddress: CAP,
      }),
  })
  port = Number(new URL(gw.url).port)
  key = (await gw.createKey({ tier: 'Standard4000' })).key
})
t.teardown(async () => {
  await gw.stop()
})

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms))

async function open(localAddress = '127.0.0.1'): Promise<{ socket: Socket; reader: ResponseReader }> {
  const socket = connect({ port, host: '127.0.0.1', localAddress })
  const reader = new ResponseReader(socket)
  await new Promise<void>((done, fail) => {
    socket.once('connect', done)
    socket.once('error', fail)
  })
  return { socket, reader }
}

/** Resolves with when the socket closed, in ms from `since`. */
const closedAfter = (socket: Socket, since: number): Promise<number> =>
  new Promise((done) => {
    if (socket.destroyed) done(Date.now() - since)
    else socket.once('close', () => done(Date.now() - since))
  })

function isContractError(t: Test, res: ParsedResponse | null, status: number, code: string, what: string): void {
  t.equal(res?.status, status, `${what}: ${status}`)
  const body = JSON.parse(res?.body.toString('utf8') || '{}') as {
    error?: { message?: unknown; type?: unknown; param?: unknown; code?: unknown }
  }
  t.equal(body.error?.code, code, `${what}: code ${code}`)
  t.type(body.error?.message, 'string', `${what}: a message`)
  t.ok(
    body.error !== undefined && 'param' in body.error && typeof body.error.type === 'string',
    `${what}: OpenAI's error shape`,
  )
}

async function healthzMs(localAddress = '127.0.0.1'): Promise<number> {
  const started = Date.now()
  const { socket, reader } = await open(localAddress)
  socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
  const res = await reader.next()
  socket.destroy()
  if (res?.status !== 200) throw new Error(`healthz answered ${res?.status}`)
  return Date.now() - started
}

t.test(
  'slowloris: headers at one byte a second are cut at the headers timeout with a 408, and others are served meanwhile',
  async (t) => {
    const head = `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n\r\n`
    const started = Date.now()
    const slow = await Promise.all(Array.from({ length: 20 }, () => open('127.0.0.2')))
    let next = 0
    const dripOne = (): void => {
      const byte = head[next++ % head.length] ?? 'x'
      for (const { socket } of slow) if (!socket.destroyed) socket.write(byte)
    }
    dripOne()
    const drip = setInterval(dripOne, 1000)
    const silent = await open('127.0.0.2')
    try {
      // Meanwhile, from the same address and from another, the gateway answers at once.
      t.ok((await healthzMs('127.0.0.2')) < 1000, 'served while the slow connections are open (same address)')
      t.ok((await healthzMs('127.0.0.9')) < 1000, 'served while the slow connections are open (another address)')
      const closed = await Promise.all(slow.map(({ socket }) => closedAfter(socket, started)))
      const slowest = Math.max(...closed)
      t.ok(Math.min(...closed) >= HEADERS_TIMEOUT_MS - 100, 'none is cut before the timeout')
      // Node looks for expired connections once a second.
      t.ok(slowest < HEADERS_TIMEOUT_MS + 3000, `all are cut soon after it (slowest at ${slowest} ms)`)
      isContractError(t, (await slow[0]?.reader.next()) ?? null, 408, 'request_timeout', 'the slow client')
      t.ok(
        (await closedAfter(silent.socket, started)) < HEADERS_TIMEOUT_MS + 3000,
        'a connection that sends nothing at all is cut too',
      )
    } finally {
      clearInterval(drip)
      for (const { socket } of slow) socket.destroy()
      silent.socket.destroy()
    }
  },
)

t.test('a body that trickles is cut with a 408 after one window; one that stops halfway too', async (t) => {
  const body = JSON.stringify({ model: CHAT, messages: [{ role: 'user', content: 'x'.repeat(8000) }], max_tokens: 4 })
  const head = `POST /v2/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`

  const trickle = await open()
  const started = Date.now()
  trickle.socket.write(head)
  let sent = 0
  const drip = setInterval(() => {
    if (!trickle.socket.destroyed && sent < body.length) trickle.socket.write(body.slice(sent, (sent += 10)))
  }, 100)
  try {
    isContractError(t, await trickle.reader.next('POST'), 408, 'request_timeout', '10 bytes every 100 ms')
    const at = await closedAfter(trickle.socket, started)
    t.ok(
      at >= BODY_WINDOW_MS - 100 && at < BODY_WINDOW_MS + 3000,
      `cut after about one window (${at} ms) and the connection closed`,
    )
  } finally {
    clearInterval(drip)
    trickle.socket.destroy()
  }

  const stall = await open()
  const stalledAt = Date.now()
  stall.socket.write(head + body.slice(0, body.length / 2))
  isContractError(t, await stall.reader.next('POST'), 408, 'request_timeout', 'half a body, then nothing')
  const at = await closedAfter(stall.socket, stalledAt)
  t.ok(at < 2 * BODY_WINDOW_MS + 3000, `cut within two windows (${at} ms)`)
  stall.socket.destroy()
})

t.test('a large upload at a steady pace is never cut, however many windows it takes', async (t) => {
  const audio = Buffer.alloc(1024 * 1024, 7)
  const { contentType, bytes } = encodeMultipart([
    { name: 'model', value: 'whisper-large-v3' },
    { name: 'file', filename: 'a.wav', data: audio, contentType: 'audio/wav' },
  ])
  const { socket, reader } = await open()
  socket.write(
    `POST /v2/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: ${contentType}\r\nContent-Length: ${bytes.length}\r\n\r\n`,
  )
  const started = Date.now()
  // 64 KiB every 250 ms: 256 KiB/s, far above the minimum, for about four windows.
  for (let at = 0; at < bytes.length; at += 64 * 1024) {
    socket.write(bytes.subarray(at, at + 64 * 1024))
    await sleep(250)
  }
  const res = await reader.next('POST')
  const took = Date.now() - started
  socket.destroy()
  t.equal(res?.status, 200, 'transcribed')
  t.ok(took > 3 * BODY_WINDOW_MS, `it took ${took} ms, several windows`)
  t.match(JSON.parse(res?.body.toString('utf8') ?? '{}'), { text: String })
})

t.test(
  `at most ${CAP} connections per address: the next one is refused at once with a 429; other addresses are not affected`,
  async (t) => {
    const held: Array<{ socket: Socket; reader: ResponseReader }> = []
    try {
      for (let i = 0; i < CAP; i++) {
        const c = await open('127.0.0.3')
        // A request each, so they are established keep-alive connections, idle afterwards.
        c.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
        t.equal((await c.reader.next())?.status, 200)
        held.push(c)
      }
      const over = await open('127.0.0.3')
      over.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
      const refused = await over.reader.next()
      isContractError(t, refused, 429, 'too_many_connections', `connection ${CAP + 1}`)
      t.equal(refused?.headers['retry-after'], '1')
      t.ok(refused?.closes, 'and closed')
      await closedAfter(over.socket, Date.now())

      t.ok((await healthzMs('127.0.0.4')) < 1000, 'another address is served')
      held.pop()?.socket.destroy()
      await sleep(100)
      t.ok((await healthzMs('127.0.0.3')) < 1000, 'a closed connection frees its place')
    } finally {
      for (const { socket } of held) socket.destroy()
    }
  },
)
