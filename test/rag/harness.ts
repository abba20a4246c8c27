// The RAG gateway's tests: a real gateway in this process (startGateway with a test
// token verifier), driven over HTTP on loopback; separate mock backend processes; and a
// raw HTTP client for what fetch would normalise (dot segments, doubled slashes).
import { spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { createServer, request as httpRequest, type RequestListener } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Writable } from 'node:stream'
import type { Test } from 'tap'
import { buildConfig } from '../../src/config/load.ts'
import type { Config } from '../../src/config/schema.ts'
import { startGateway, type Gateway } from '../../src/main.ts'
import { createLogger } from '../../src/observability/logger.ts'
import { defaultConfigDoc } from '../helpers/gateway.ts'
import { createTestTokens, type TestTokens } from '../helpers/rag-tokens.ts'
import { readText, type TextReply } from '../helpers/http.ts'

const ROOT = resolve(import.meta.dirname, '../..')

export interface RagHarness {
  readonly gateway: Gateway
  readonly url: string
  readonly tokens: TestTokens
  readonly config: Config
  /** Every JSON line the gateway logged. */
  logs(): Array<Record<string, unknown>>
  /** Headers with a bearer token for this user. */
  auth(claims?: Parameters<TestTokens['sign']>[0]): Promise<Record<string, string>>
}

export interface HarnessOptions {
  /** Changes to the default configuration document (YAML as parsed). */
  readonly config?: (doc: Record<string, unknown>) => void
  readonly redisUrl?: string
  /** Share one signing key between gateways (two instances on one Redis). */
  readonly tokens?: TestTokens
}

export async function startRagHarness(t: Test, options: HarnessOptions = {}): Promise<RagHarness> {
  const doc = defaultConfigDoc()
  const rag = (doc.rag ?? {}) as Record<string, unknown>
  // Upload and ingestion states final at once; a test that walks them sets a step.
  rag.mock = { tokenDelayMs: 5, statusStepMs: 0 }
  doc.rag = rag
  options.config?.(doc)
  const dataDir = mkdtempSync(join(tmpdir(), 'tollgate-rag-'))
  const env: Record<string, string> = {
    TOLLGATE_DATA_DIR: dataDir,
    PORT: '0',
    METRICS_PORT: '0',
    TOLLGATE_ADMIN_TOKEN: 'adm_rag_test_token_1234567890abcdef',
  }
  if (options.redisUrl !== undefined) {
    env.REDIS_URL = options.redisUrl
    env.TOLLGATE_KEY_SECRET = 'rag-test-key-secret-0123456789abcdef'
  }
  const config = buildConfig(doc, join(ROOT, 'config/default.yaml'), env)
  const lines: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean))
      done()
    },
  })
  const tokens = options.tokens ?? (await createTestTokens())
  const gateway = await startGateway(config, createLogger('info', sink), { accessTokens: tokens.verifier })
  t.teardown(() => gateway.shutdown())
  return {
    gateway,
    url: gateway.url,
    tokens,
    config,
    logs: () =>
      lines.flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, unknown>]
        } catch {
          return []
        }
      }),
    auth: async (claims = { sub: 'user-1', name: 'Ada', roles: ['user'], groups: ['research'], tenant: 'acme' }) => ({
      authorization: `Bearer ${await tokens.sign(claims)}`,
    }),
  }
}

export interface MockProcess {
  readonly url: string
  stop(): Promise<void>
}

/** `tollgate rag-mock --port 0 --service <service>` (the command docs/rag-gateway.md gives) as its own process. */
export async function startMockProcess(t: Test, service: string, extra: readonly string[] = []): Promise<MockProcess> {
  const child = spawn(
    process.execPath,
    [join(ROOT, 'src/cli.ts'), 'rag-mock', '--port', '0', '--service', service, '--token-delay-ms', '5', ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  const port = await new Promise<number>((done, fail) => {
    let buffer = ''
    const timer = setTimeout(() => fail(new Error(`mock ${service} did not start`)), 20_000)
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffer += chunk
      const line = buffer.split('\n').find((l) => l.startsWith('{'))
      if (line !== undefined) {
        clearTimeout(timer)
        done((JSON.parse(line) as { port: number }).port)
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      fail(new Error(`mock ${service} exited with ${code}`))
    })
  })
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((done) => child.once('exit', done))
    child.kill('SIGTERM')
    await exited
  }
  t.teardown(stop)
  return { url: `http://127.0.0.1:${port}`, stop }
}

export type RawReply = TextReply

/** A backend served from this process on a loopback port, closed when the test ends: its base URL. */
export async function serveBackend(t: Test, handler: RequestListener): Promise<string> {
  const server = createServer(handler)
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Sends the request target exactly as given (fetch would normalise dot segments and slashes). */
export function rawRequest(
  base: string,
  target: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<RawReply> {
  const url = new URL(base)
  return new Promise((done, fail) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: options.method ?? 'GET', path: target, headers: options.headers },
      readText(done),
    )
    req.once('error', fail)
    req.end(options.body)
  })
}
