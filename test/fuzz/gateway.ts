// The gateway a fuzz run attacks, and what the run knows about it. Its limits are small
// so that refusals are cheap to reach (256 KiB JSON, 1 MiB uploads) and its timeouts
// short so that a half-sent request is settled in about a second; its mock streams at
// full speed. The run's API key is on a tier without limits: a 429 would end most cases
// before their body is read.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parse } from 'yaml'
import { encodeMultipart } from '../helpers/multipart.ts'
import { startTollgate, startUpstream, type RunningTollgate, type UpstreamProcess } from '../helpers/gateway.ts'
import { MEMORY_PROBE } from '../helpers/memory.ts'
import { createKeyByFetch, createUser, signInByFetch, type FetchSession } from '../portal/helpers.ts'
import { bearer, type Credential, type FuzzContext } from './targets.ts'

const ROOT = resolve(import.meta.dirname, '../..')

export interface FuzzGateway {
  readonly gw: RunningTollgate
  readonly port: number
  readonly ctx: FuzzContext
  /** The separate upstream server, and how many requests it had received when the run began. */
  readonly upstream: UpstreamProcess
  readonly upstreamRequestsAtStart: number
  /** Ids of another owner's objects (ctx.ids['foreign.*']) that no fuzz call may reach. */
  readonly foreignIds: readonly string[]
  stop(): Promise<void>
}

export interface FuzzGatewayOptions {
  /**
   * Every model and the resource backend on the upstream server, which keeps the request
   * bodies it receives: what reached it can be searched for another owner's ids.
   */
  readonly everythingUpstream?: boolean
}

export async function startFuzzGateway(options: FuzzGatewayOptions = {}): Promise<FuzzGateway> {
  const plans = parse(readFileSync(join(ROOT, 'config/plans.yaml'), 'utf8')) as { tiers: Record<string, unknown> }
  plans.tiers.Fuzz = { description: 'no limits', default: {} }
  // Half the chat and embedding models go through the openai adapter to a separate
  // server (re-serialized bodies, the proxy, the relay); the rest to the built-in mock.
  // Its idle connections stay open longer than the run, so that no case meets a server
  // closing an idle connection as the gateway reuses it (the adapter sends such a call once
  // more, test/backends/openai.test.ts; it is not what the fuzz is about).
  const upstream = await startUpstream([
    '--tokens-per-second',
    '1000000',
    '--keep-alive-ms',
    '600000',
    ...(options.everythingUpstream ? ['--record-bodies'] : []),
  ])
  const gw = await startTollgate({
    execArgv: MEMORY_PROBE,
    dropRequestLogs: true,
    config: (doc) => {
      Object.assign(doc.server as Record<string, unknown>, {
        jsonBodyLimitBytes: 256 * 1024,
        uploadLimitBytes: 1024 * 1024,
        headersTimeoutMs: 2000,
        bodyRateWindowMs: 1000,
        bodyMinBytesPerSecond: 1024,
        idleReaderTimeoutMs: 5000,
      })
      Object.assign((doc.backends as Record<string, Record<string, unknown>>).mock ?? {}, {
        tokensPerSecond: 1_000_000,
      })
      ;(doc.backends as Record<string, unknown>).up = { type: 'openai', baseUrl: `${upstream.url}/v1` }
      const models = doc.models as Array<{ kind: string; deployments: Array<{ backend: string }> }>
      models.forEach((m, i) => {
        if (options.everythingUpstream || ((m.kind === 'chat' || m.kind === 'embedding') && i % 2 === 1))
          m.deployments = [{ backend: 'up' }]
      })
      if (options.everythingUpstream) doc.resourceBackend = 'up'
      doc.plans = plans
      // Thousands of logins from one address: the throttle would answer most of them 429.
      doc.ragAuth = { loginThrottle: { maxFailuresPerUsername: 1_000_000, maxFailuresPerAddress: 1_000_000 } }
    },
  })
  const apiKey = (await gw.createKey({ tier: 'Fuzz', owner: 'fuzz' })).key
  const foreign = await foreignObjects(gw)
  // Keys the admin routes may change, rotate and revoke; never the run's own.
  const victims = await Promise.all(
    [1, 2, 3, 4, 5].map((i) => gw.createKey({ name: `victim ${i}`, owner: 'fuzz-victims' })),
  )
  const upload = encodeMultipart([
    { name: 'purpose', value: 'fine-tune' },
    { name: 'file', filename: 'train.jsonl', data: Buffer.from('{"messages": []}\n') },
  ])
  const file = (await (
    await fetch(`${gw.url}/v2/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': upload.contentType },
      body: upload.bytes,
    })
  ).json()) as { id: string }
  const job = (await (
    await fetch(`${gw.url}/v2/fine_tuning/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-4o-mini', training_file: file.id }),
    })
  ).json()) as { id: string }
  const stores = await Promise.all(
    [1, 2, 3].map(
      async (i) =>
        (
          (await (
            await fetch(`${gw.url}/v1/vector_stores`, {
              method: 'POST',
              headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
              body: JSON.stringify({ name: `fuzz ${i}`, file_ids: [file.id] }),
            })
          ).json()) as { id: string }
        ).id,
    ),
  )
  const queued = await Promise.all(
    [1, 2, 3].map(
      async () =>
        (
          (await (
            await fetch(`${gw.url}/queue/embeddings`, {
              method: 'POST',
              headers: {
                authorization: `Bearer ${apiKey}`,
                'content-type': 'application/json',
                prefer: 'respond-async',
              },
              body: JSON.stringify({ model: 'text-embedding-ada-002', input: 'queued' }),
            })
          ).json()) as { id: string }
        ).id,
    ),
  )
  // RAG gateway accounts the admin routes may change and delete.
  const users = ['fuzz-victim-1', 'fuzz-victim-2', 'fuzz-victim-3']
  await Promise.all(
    users.map((username) =>
      fetch(`${gw.url}/admin/users`, {
        method: 'POST',
        headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ username, password: 'victim password' }),
      }),
    ),
  )
  // A RAG gateway user and a session of its own for /api/v1/auth/me.
  await fetch(`${gw.url}/admin/users`, {
    method: 'POST',
    headers: { authorization: `Bearer ${gw.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'fuzz-rag', password: 'fuzz-rag password' }),
  })
  const session = (await (
    await fetch(`${gw.url}/api/v1/auth/user`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'fuzz-rag', password: 'fuzz-rag password' }),
    })
  ).json()) as { access_token: string; refresh_token: string }
  const portal = await portalOf(gw)
  const models = (await (
    await fetch(`${gw.url}/v2/models`, { headers: { authorization: `Bearer ${apiKey}` } })
  ).json()) as { data: Array<{ id: string }> }
  const config = parse(readFileSync(join(ROOT, 'config/default.yaml'), 'utf8')) as {
    models: Array<{ name: string; kind: string }>
  }
  const byKind: Record<string, string[]> = {}
  for (const m of config.models) if (models.data.some((d) => d.id === m.name)) (byKind[m.kind] ??= []).push(m.name)
  return {
    gw,
    upstream,
    upstreamRequestsAtStart: (await upstream.requests()).length,
    foreignIds: Object.values(foreign).flat(),
    async stop() {
      await gw.stop()
      await upstream.stop()
    },
    port: Number(new URL(gw.url).port),
    ctx: {
      credentials: {
        'api-key': bearer(apiKey),
        // The same key as Anthropic's SDKs send it (the Messages API routes).
        'anthropic-key': { header: 'x-api-key', value: apiKey },
        admin: bearer(gw.adminToken),
        session: bearer(session.access_token),
        ...portal.credentials,
      },
      models: byKind,
      ids: {
        key: victims.map((v) => v.id),
        file: [file.id],
        'fine_tuning.job': [job.id],
        vector_store: stores,
        'queue.request': queued,
        user: users,
        ...foreign,
        'portal.key': portal.keys,
        'portal.key.revocable': portal.revocable,
        'portal.asset': ['portal.css', 'portal.js'],
      },
      secrets: [
        apiKey,
        gw.adminToken,
        session.access_token,
        session.refresh_token,
        'fuzz-rag password',
        ...portal.secrets,
      ],
    },
  }
}

/** Another owner's file, vector store, response and output item, as ctx.ids['foreign.*']. */
async function foreignObjects(gw: RunningTollgate): Promise<Record<string, string[]>> {
  const key = (await gw.createKey({ tier: 'Fuzz', owner: 'fuzz-other' })).key
  const post = async (
    path: string,
    body: string | Uint8Array,
    headers: Record<string, string> = { 'content-type': 'application/json' },
  ): Promise<Record<string, unknown>> => {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, ...headers },
      body,
    })
    if (res.status !== 200) throw new Error(`foreign object ${path}: ${res.status}`)
    return (await res.json()) as Record<string, unknown>
  }
  const upload = encodeMultipart([
    { name: 'purpose', value: 'assistants' },
    { name: 'file', filename: 'other.txt', data: Buffer.from("another owner's notes") },
  ])
  const file = String((await post('/v1/files', upload.bytes, { 'content-type': upload.contentType })).id)
  const store = String((await post('/v1/vector_stores', JSON.stringify({ name: 'other', file_ids: [file] }))).id)
  const response = await post(
    '/v2/responses',
    JSON.stringify({ model: 'gpt-4o-mini', input: 'hello', max_output_tokens: 4 }),
  )
  const item = (response.output as Array<{ id: string }> | undefined)?.[0]?.id ?? 'msg_none'
  return {
    'foreign.file': [file],
    'foreign.vector_store': [store],
    'foreign.response': [String(response.id)],
    'foreign.item': [item],
  }
}

const PORTAL_PASSWORD = 'fuzz-portal password'

const cookieOf = (s: FetchSession): Credential => ({ header: 'cookie', value: s.cookie, csrf: s.csrf })

/**
 * The portal's side: a user with keys (some to revoke) and a day of usage on one, an admin,
 * and a third session for sign-out to end; each signed in. The keys' secrets, the sessions'
 * cookies and the passwords are secrets no reply may hold (a key's secret is shown once,
 * when it is made).
 */
async function portalOf(
  gw: RunningTollgate,
): Promise<{ credentials: Record<string, Credential>; keys: string[]; revocable: string[]; secrets: string[] }> {
  await createUser(gw, 'fuzz-portal', PORTAL_PASSWORD)
  await createUser(gw, 'fuzz-portal-admin', 'fuzz-portal-admin password', ['admin'])
  const user = await signInByFetch(gw.url, 'fuzz-portal', PORTAL_PASSWORD)
  const admin = await signInByFetch(gw.url, 'fuzz-portal-admin', 'fuzz-portal-admin password')
  const leaving = await signInByFetch(gw.url, 'fuzz-portal', PORTAL_PASSWORD)
  const made: Array<{ id: string; secret: string }> = []
  for (const name of ['fuzz 1', 'fuzz 2', 'fuzz 3', 'to revoke 1', 'to revoke 2', 'to revoke 3']) {
    const { id, secret } = await createKeyByFetch(user, name)
    made.push({ id, secret })
  }
  const used = made[0]
  if (used === undefined) throw new Error('no portal key')
  const call = await fetch(`${gw.url}/v2/embeddings`, {
    method: 'POST',
    headers: { authorization: `Bearer ${used.secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'text-embedding-ada-002', input: 'usage' }),
  })
  if (call.status !== 200) throw new Error(`portal key call: ${call.status}`)
  return {
    credentials: { portal: cookieOf(user), 'portal-admin': cookieOf(admin), 'portal-leaving': cookieOf(leaving) },
    keys: made.slice(0, 3).map((k) => k.id),
    revocable: made.slice(3).map((k) => k.id),
    secrets: [
      PORTAL_PASSWORD,
      'fuzz-portal-admin password',
      ...[user, admin, leaving].map((s) => s.cookie.split('=')[1] ?? s.cookie),
      ...made.map((k) => k.secret),
    ],
  }
}
