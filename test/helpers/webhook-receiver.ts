// A webhook receiver on loopback for the tests, verifying every delivery the way the
// Standard Webhooks specification tells a receiver to, written here from the specification
// and not from the gateway's signing code: the signed content is `id.timestamp.body`, the
// key is the base64 after `whsec_`, webhook-signature may hold several space-separated
// `v1,<base64>` signatures (any one matching is enough), and a timestamp more than five
// minutes from the receiver's clock is refused (a replayed delivery).
import { createHmac, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export const TOLERANCE_SECONDS = 5 * 60

export interface Received {
  readonly id: string
  readonly type: string
  readonly timestamp: string
  readonly data: Record<string, unknown>
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: string
  readonly verified: boolean
  /** Why verification failed, if it did. */
  readonly problem: string | null
}

/** Verifies one delivery; null when it is genuine, else the reason. */
export function verifyStandardWebhook(
  secret: string,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  body: string,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): string | null {
  const id = headers['webhook-id']
  const timestamp = headers['webhook-timestamp']
  const signatures = headers['webhook-signature']
  if (typeof id !== 'string' || typeof timestamp !== 'string' || typeof signatures !== 'string')
    return 'missing webhook headers'
  if (!/^\d+$/.test(timestamp)) return 'bad timestamp'
  if (Math.abs(nowSeconds - Number(timestamp)) > TOLERANCE_SECONDS) return 'timestamp out of tolerance'
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest()
  for (const versioned of signatures.split(' ')) {
    const [version, signature] = versioned.split(',')
    if (version !== 'v1' || signature === undefined) continue
    const given = Buffer.from(signature, 'base64')
    if (given.length === expected.length && timingSafeEqual(given, expected)) return null
  }
  return 'no signature matches'
}

export type ReceiverMode =
  | { readonly kind: 'ok' }
  | { readonly kind: 'status'; readonly status: number }
  | { readonly kind: 'redirect'; readonly location: string }
  /** Reads the delivery and never answers (until the sender gives up or the receiver stops). */
  | { readonly kind: 'hang' }

export interface WebhookReceiver {
  readonly url: string
  readonly port: number
  /** Every delivery that reached it (whatever it answered), in order. */
  readonly received: Received[]
  /** Deliveries answered 2xx, by event id: more than one for an id is a duplicate. */
  accepted(): Map<string, Received[]>
  secret: string
  mode: ReceiverMode
  /** Stops listening (connections are refused) until start(). */
  stop(): Promise<void>
  /** Listens again on the same port. */
  start(): Promise<void>
  close(): Promise<void>
}

export async function startWebhookReceiver(secret = ''): Promise<WebhookReceiver> {
  const received: Received[] = []
  const answered = new Map<Received, number>()
  let server: Server
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      let parsed: { id?: unknown; type?: unknown; timestamp?: unknown; data?: unknown } = {}
      try {
        parsed = JSON.parse(body) as typeof parsed
      } catch {
        // recorded as is; verification fails below on a missing id at worst
      }
      const problem = verifyStandardWebhook(receiver.secret, req.headers, body)
      const entry: Received = {
        id: String(req.headers['webhook-id'] ?? ''),
        type: String(parsed.type ?? ''),
        timestamp: String(parsed.timestamp ?? ''),
        data: (parsed.data ?? {}) as Record<string, unknown>,
        headers: req.headers,
        body,
        verified: problem === null && parsed.id === req.headers['webhook-id'],
        problem,
      }
      received.push(entry)
      const mode = receiver.mode
      if (mode.kind === 'hang') return
      if (mode.kind === 'redirect') {
        answered.set(entry, 302)
        res.writeHead(302, { location: mode.location }).end()
        return
      }
      const status = mode.kind === 'status' ? mode.status : problem === null ? 204 : 401
      answered.set(entry, status)
      res.writeHead(status).end()
    })
  }
  const listen = (port: number): Promise<number> =>
    new Promise((done, fail) => {
      server = createServer(handler)
      server.keepAliveTimeout = 1
      server.once('error', fail)
      server.listen(port, '127.0.0.1', () => done((server.address() as AddressInfo).port))
    })
  const port = await listen(0)
  const stop = (): Promise<void> =>
    new Promise((done) => {
      server.close(() => done())
      server.closeAllConnections()
    })
  const receiver: WebhookReceiver = {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    secret,
    mode: { kind: 'ok' },
    accepted() {
      const byId = new Map<string, Received[]>()
      for (const r of received) {
        const status = answered.get(r) ?? 0
        if (status < 200 || status >= 300) continue
        byId.set(r.id, [...(byId.get(r.id) ?? []), r])
      }
      return byId
    },
    stop,
    async start() {
      await listen(port)
    },
    close: stop,
  }
  return receiver
}
