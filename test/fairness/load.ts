// Closed-loop clients for the fair-share tests: each of a tenant's clients sends a streamed
// /queue chat completion (or /v2, `path`), reads it to its usage, and sends the next, until
// told to stop. A /v2 client answered 429 does what a client should: waits the
// retry-after-ms it was given, then sends again (the 429s are tallied by code, not failures).
// Served tokens (prompt + completion, from the reply's usage) are tallied per tenant, and a
// test waits on the tally (never on the clock).

export interface Tenant {
  readonly name: string
  readonly key: string
  /** Where each client sends (clients are spread over them in turn). */
  readonly urls: readonly string[]
  readonly clients: number
  readonly maxTokens: number
  /** Where the calls go; default '/queue'. */
  readonly path?: '/queue' | '/v2'
}

export interface Load {
  /** Tokens served per tenant since the last reset, and calls completed. */
  readonly served: Map<string, number>
  /** The 429s of /v2 clients since the last reset, by tenant and error code ('flood fair_share_exceeded'). */
  readonly refused: Map<string, number>
  calls(): number
  /** Resolves once `n` calls completed since the last reset. */
  until(n: number): Promise<void>
  reset(): void
  /** Starts a tenant's clients (a tenant may join later). */
  start(tenant: Tenant): void
  /** Stops every client and waits for the calls in flight; the statuses other than 200 seen. */
  stop(): Promise<number[]>
}

async function streamedCall(
  url: string,
  key: string,
  maxTokens: number,
  n: number,
  path = '/queue',
): Promise<{ status: number; tokens: number; code?: string; retryMs?: number }> {
  const res = await fetch(`${url}${path}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      max_tokens: maxTokens,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: `call ${n}` }],
    }),
  })
  const text = await res.text()
  if (res.status === 429) {
    const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? ''
    return { status: 429, tokens: 0, code, retryMs: Number(res.headers.get('retry-after-ms') ?? 1000) }
  }
  if (res.status !== 200) return { status: res.status, tokens: 0 }
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: {')) continue
    const usage = (JSON.parse(line.slice(6)) as { usage?: { total_tokens?: number } | null }).usage
    if (usage?.total_tokens !== undefined) return { status: 200, tokens: usage.total_tokens }
  }
  return { status: 200, tokens: 0 }
}

export function load(): Load {
  const served = new Map<string, number>()
  const refused = new Map<string, number>()
  const failures: number[] = []
  const running: Promise<void>[] = []
  let stopped = false
  let calls = 0
  let waiting: { n: number; done: () => void } | null = null
  let sent = 0
  const client = async (tenant: Tenant, url: string): Promise<void> => {
    while (!stopped) {
      const { status, tokens, code, retryMs } = await streamedCall(
        url,
        tenant.key,
        tenant.maxTokens,
        sent++,
        tenant.path,
      )
      if (status === 429 && tenant.path === '/v2') {
        const what = `${tenant.name} ${code}`
        refused.set(what, (refused.get(what) ?? 0) + 1)
        await new Promise((wake) => setTimeout(wake, retryMs))
        continue
      }
      if (status !== 200) {
        failures.push(status)
        continue
      }
      served.set(tenant.name, (served.get(tenant.name) ?? 0) + tokens)
      calls++
      if (waiting !== null && calls >= waiting.n) {
        waiting.done()
        waiting = null
      }
    }
  }
  return {
    served,
    refused,
    calls: () => calls,
    until: (n) =>
      new Promise<void>((done) => {
        if (calls >= n) return done()
        waiting = { n, done }
      }),
    reset() {
      served.clear()
      refused.clear()
      calls = 0
    },
    start(tenant) {
      for (let i = 0; i < tenant.clients; i++)
        running.push(client(tenant, tenant.urls[i % tenant.urls.length] as string))
    },
    async stop() {
      stopped = true
      await Promise.all(running)
      return failures
    },
  }
}

/** Each tenant's share of the tokens served. */
export function shares(served: ReadonlyMap<string, number>): Record<string, number> {
  const total = [...served.values()].reduce((a, b) => a + b, 0)
  return Object.fromEntries([...served].map(([name, tokens]) => [name, total === 0 ? 0 : tokens / total]))
}
