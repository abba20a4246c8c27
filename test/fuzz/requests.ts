// Whole requests as bytes on the wire: a target's body with its framing (honest, or two
// Content-Lengths, chunked plus a length, a length that lies, bad chunks), headers
// (credentials right and wrong, oversized, thousands, invalid characters), the request
// line (doubled and encoded slashes, dot segments, long URLs, odd methods, HTTP/1.0 and
// versions that do not exist), and several requests pipelined on one connection.
import fc from 'fast-check'
import { bodyFor, type Body } from './bodies.ts'
import type { Credential, FuzzContext, FuzzTarget } from './targets.ts'

export interface WireRequest {
  readonly method: string
  readonly bytes: Buffer
}

export interface FuzzCase {
  readonly target: string
  /** Several: pipelined, written at once on one connection. */
  readonly requests: readonly WireRequest[]
  /** The connection can serve the next case afterwards: honest framing, HTTP/1.1, nothing half-sent. */
  readonly reusable: boolean
  /** What was done to it, for reports. */
  readonly tags: readonly string[]
}

/** How often each kind of mutation is applied, 0 to 1. */
export interface Mix {
  readonly framing: number
  readonly headers: number
  readonly url: number
  readonly method: number
  readonly version: number
  readonly auth: number
  /** Share of cases that are 2-5 requests pipelined on one connection. */
  readonly pipeline: number
}

/** `arb` with probability p, else null. */
function sometimes<T>(p: number, arb: fc.Arbitrary<T>): fc.Arbitrary<T | null> {
  if (p <= 0) return fc.constant(null)
  if (p >= 1) return arb
  const weight = Math.max(1, Math.round(p * 1000))
  return fc.oneof({ weight: 1000 - weight, arbitrary: fc.constant(null) }, { weight, arbitrary: arb })
}

// Credentials.

type Header = readonly [string, string]
/** The credential's headers as sent; tag null when they are the right ones. */
type AuthChoice = { readonly headers: readonly Header[]; readonly tag: string | null }

const headerOf = (credential: Credential): Header => [
  credential.header === 'cookie' ? 'Cookie' : credential.header === 'x-api-key' ? 'X-Api-Key' : 'Authorization',
  credential.value,
]

const MALFORMED_AUTHORIZATION = [
  'Bearer',
  'Bearer ',
  'bearer x',
  'Basic dXNlcjpwYXNz',
  'Bearer tg1_' + 'A'.repeat(49),
  'Bearer tg1_short',
  `Bearer ${'x'.repeat(8000)}`,
  'Bearer a b',
  'Token abc',
  'Bearer \u00e9',
  '',
  ' ',
]

/** A session cookie mangled: cut, lengthened, quoted, renamed, repeated, or one of the right length that no session has. */
function malformedCookies(value: string): string[] {
  const at = value.indexOf('=')
  const name = value.slice(0, at)
  const token = value.slice(at + 1)
  const flipped = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`
  return [
    `${name}=`,
    name,
    `${name}=short`,
    `${name}=${'A'.repeat(token.length)}`,
    `${name}=${flipped}`,
    `${name}=${token}x`,
    `${name}="${token}"`,
    `${name.toUpperCase()}=${token}`,
    `${name}=${'x'.repeat(8000)}`,
    `${name}=${token.slice(0, 20)}\u00e9${token.slice(21)}`,
    `${name}=x; ${name}=${token}`,
    `other=1; ${name} = ${token}`,
    '=',
    ';;;',
    '',
    ' ',
  ]
}

function authFor(target: FuzzTarget, ctx: FuzzContext, p: number): fc.Arbitrary<AuthChoice> {
  const right = ctx.credentials[target.auth]
  const rightHeader: Header = right === undefined ? ['Authorization', 'Bearer x'] : headerOf(right)
  const others = Object.entries(ctx.credentials)
    .filter(([name]) => name !== target.auth)
    .map(([, credential]) => headerOf(credential))
  const malformed = right?.header === 'cookie' ? malformedCookies(right.value) : MALFORMED_AUTHORIZATION
  /** A value of the right credential's kind that nothing knows. */
  const stranger = (token: string): string =>
    right?.header === 'cookie'
      ? `${right.value.split('=')[0] ?? ''}=${token}`
      : right?.header === 'x-api-key'
        ? token
        : `Bearer ${token}`
  const wrong = fc.oneof(
    fc.constant<AuthChoice>({ headers: [], tag: 'auth-none' }),
    fc
      .constantFrom(...(others.length > 0 ? others : [['Authorization', 'Bearer nothing'] as const]))
      .map((h): AuthChoice => ({ headers: [h], tag: 'auth-other-credential' })),
    fc.constantFrom(...malformed).map((v): AuthChoice => ({ headers: [[rightHeader[0], v]], tag: 'auth-malformed' })),
    fc.constant<AuthChoice>({ headers: [rightHeader, [rightHeader[0], stranger('second')]], tag: 'auth-twice' }),
    fc.constant<AuthChoice>({
      headers: [[rightHeader[0], stranger('wrong')], rightHeader],
      tag: 'auth-twice-wrong-first',
    }),
  )
  return sometimes(p, wrong).map((w) => w ?? { headers: right === undefined ? [] : [rightHeader], tag: null })
}

// What a browser says of where a request comes from. The fuzz gateway is reached as
// http://fuzz.local (the Host every case sends); a browser sends Origin on a POST and
// Sec-Fetch-Site on everything, and a forged request says another site, or lies badly.

const SAME_SITE: ReadonlyArray<readonly Header[]> = [
  [],
  [['Origin', 'http://fuzz.local']],
  [
    ['Origin', 'http://fuzz.local'],
    ['Sec-Fetch-Site', 'same-origin'],
  ],
  [['Sec-Fetch-Site', 'none']],
  // From a client, not a trusted proxy: it changes nothing.
  [
    ['Origin', 'http://fuzz.local'],
    ['X-Forwarded-Proto', 'https'],
  ],
]
const FOREIGN_SITE: ReadonlyArray<readonly Header[]> = [
  [['Origin', 'http://evil.example']],
  [['Origin', 'null']],
  [['Origin', 'https://fuzz.local']],
  [['Origin', 'http://fuzz.local:80']],
  [['Origin', 'http://FUZZ.local']],
  [['Origin', 'http://fuzz.local/']],
  [
    ['Origin', 'http://fuzz.local'],
    ['Origin', 'http://evil.example'],
  ],
  [['Origin', '']],
  [
    ['Origin', 'http://fuzz.local'],
    ['Sec-Fetch-Site', 'cross-site'],
  ],
  [['Sec-Fetch-Site', 'same-site']],
  [['Sec-Fetch-Site', 'cross-site']],
  [['Sec-Fetch-Site', '']],
  [
    ['Origin', 'https://fuzz.local'],
    ['X-Forwarded-Proto', 'https'],
  ],
]

function siteFor(target: FuzzTarget, p: number): fc.Arbitrary<AuthChoice> {
  if (target.browser !== true) return fc.constant({ headers: [], tag: null })
  const foreign = fc.constantFrom(...FOREIGN_SITE).map((headers): AuthChoice => ({ headers, tag: 'site-foreign' }))
  return sometimes(p, foreign).chain((f) =>
    f === null ? fc.constantFrom(...SAME_SITE).map((headers): AuthChoice => ({ headers, tag: null })) : fc.constant(f),
  )
}

// Framing.

/** The framings a fuzzed request may take instead of a plain Content-Length. */
const FRAMINGS = [
  'chunked',
  'two-lengths-same',
  'two-lengths-different',
  'chunked-and-length',
  'length-list',
  'bad-length',
  'short-length',
  'long-length',
  'chunked-unterminated',
  'bad-chunk',
  'other-encoding',
  'no-length',
] as const

type Framing = 'length' | (typeof FRAMINGS)[number]

/** Framings after which the connection is in an unknown state: never reused (all but 'chunked', the one well-formed framing here). */
const BREAKS_CONNECTION = new Set<Framing>(FRAMINGS.filter((framing) => framing !== 'chunked'))

function chunked(body: Buffer, sizes: readonly number[], ext: boolean, terminate: boolean): Buffer {
  const out: Buffer[] = []
  let at = 0
  let i = 0
  while (at < body.length) {
    const size = Math.max(1, Math.min(body.length - at, sizes[i++ % Math.max(1, sizes.length)] ?? 64))
    out.push(
      Buffer.from(`${size.toString(16)}${ext ? ';fuzz=1' : ''}\r\n`),
      body.subarray(at, at + size),
      Buffer.from('\r\n'),
    )
    at += size
  }
  if (terminate) out.push(Buffer.from(ext ? '0\r\nX-Trailer: 1\r\n\r\n' : '0\r\n\r\n'))
  return Buffer.concat(out)
}

interface Framed {
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly body: Buffer
}

function frame(
  framing: Framing,
  body: Buffer,
  detail: { sizes: number[]; ext: boolean; n: number; junk: string },
): Framed {
  const length = String(body.length)
  switch (framing) {
    case 'length':
      return { headers: [['Content-Length', length]], body }
    case 'chunked':
      return { headers: [['Transfer-Encoding', 'chunked']], body: chunked(body, detail.sizes, detail.ext, true) }
    case 'two-lengths-same':
      return {
        headers: [
          ['Content-Length', length],
          ['Content-Length', length],
        ],
        body,
      }
    case 'two-lengths-different':
      return {
        headers: [
          ['Content-Length', length],
          ['Content-Length', String(body.length + 1 + (detail.n % 100))],
        ],
        body,
      }
    case 'chunked-and-length':
      return {
        headers: [
          ['Transfer-Encoding', 'chunked'],
          ['Content-Length', length],
        ],
        body: chunked(body, detail.sizes, false, true),
      }
    case 'length-list':
      return { headers: [['Content-Length', `${length}, ${length}`]], body }
    case 'bad-length':
      return { headers: [['Content-Length', detail.junk]], body }
    case 'short-length':
      return { headers: [['Content-Length', String(Math.floor(body.length / 2))]], body }
    case 'long-length':
      return { headers: [['Content-Length', String(body.length + 1 + (detail.n % 5000))]], body }
    case 'chunked-unterminated':
      return { headers: [['Transfer-Encoding', 'chunked']], body: chunked(body, detail.sizes, false, false) }
    case 'bad-chunk':
      return {
        headers: [['Transfer-Encoding', 'chunked']],
        body: Buffer.concat([Buffer.from(`${detail.junk}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]),
      }
    case 'other-encoding':
      return {
        headers: [
          [
            'Transfer-Encoding',
            ['gzip', 'identity', 'chunked, gzip', 'gzip, chunked', 'chunked, chunked', 'Chunked', ' chunked'][
              detail.n % 7
            ] ?? 'gzip',
          ],
        ],
        body: chunked(body, detail.sizes, false, true),
      }
    case 'no-length':
      return { headers: [], body }
  }
}

const framingDetail = fc.record({
  sizes: fc.array(fc.integer({ min: 1, max: 4096 }), { minLength: 1, maxLength: 5 }),
  ext: fc.boolean(),
  n: fc.nat(),
  junk: fc.constantFrom(
    '-1',
    '+5',
    '0x10',
    '1e3',
    '',
    ' ',
    'abc',
    '99999999999999999999999',
    '5 5',
    'ffffffffffffffffff',
    'zz',
    '1;' + 'e'.repeat(20_000),
  ),
})

// Headers.

const headerJunk: fc.Arbitrary<{ headers: Array<[string, string]>; tag: string }> = fc.oneof(
  fc
    .integer({ min: 8, max: 80 })
    .map((kib) => ({ headers: [['X-Fuzz-Big', 'v'.repeat(kib * 1024)] as [string, string]], tag: 'oversized-header' })),
  fc.integer({ min: 100, max: 3000 }).map((n) => ({
    headers: Array.from({ length: n }, (_, i): [string, string] => [`X-Fuzz-${i}`, 'v']),
    tag: 'many-headers',
  })),
  fc
    .constantFrom<[string, string]>(
      ['X Fuzz', 'v'],
      ['X-Fuzz(', 'v'],
      ['X-Fu\u0000zz', 'v'],
      ['X-Fé', 'v'],
      ['', 'v'],
      [':authority', 'x'],
    )
    .map((h) => ({ headers: [h], tag: 'bad-header-name' })),
  fc
    .constantFrom<[string, string]>(
      ['X-Fuzz', 'a\u0000b'],
      ['X-Fuzz', 'a\u007fb'],
      ['X-Fuzz', 'a\rb'],
      ['X-Fuzz', 'a\r\n b'],
      ['X-Fuzz', '\u00e9\u00ff'],
    )
    .map((h) => ({ headers: [h], tag: 'bad-header-value' })),
  fc
    .constantFrom<[string, string]>(
      ['x-request-id', 'x'.repeat(5000)],
      ['x-request-id', '<script>'],
      ['x-request-id', 'a\u00ffb'],
      ['X-Forwarded-For', '1.2.3.4, <x>'],
      ['X-Tollgate-Key', 'spoof'],
    )
    .map((h) => ({ headers: [h], tag: 'hostile-header' })),
  fc.constant({ headers: [] as Array<[string, string]>, tag: 'no-host' }),
  fc
    .constantFrom<[string, string]>(
      ['Expect', '100-continue'],
      ['Expect', 'something-else'],
      ['Connection', 'close'],
      ['Connection', 'Upgrade'],
      ['Upgrade', 'websocket'],
      ['Upgrade', 'h2c'],
      ['Host', 'other'],
      ['Content-Encoding', 'gzip'],
      ['Accept-Encoding', 'gzip, br'],
    )
    .map((h) => ({ headers: [h], tag: `header-${h[0].toLowerCase()}` })),
)

// The request line.

function pathOf(target: FuzzTarget, ctx: FuzzContext, n: number): string {
  const models = Object.values(ctx.models).flat()
  const ids = target.idKind === undefined ? [] : (ctx.ids[target.idKind] ?? [])
  const id =
    ids.length > 0 && n % 4 !== 0
      ? (ids[n % ids.length] ?? 'x')
      : (['unknown-id', 'key_000000000000000000000000', '%00', '..', 'a'.repeat(300)][n % 5] ?? 'x')
  return target.path
    .replace('{model}', encodeURIComponent(models[n % Math.max(1, models.length)] ?? 'gpt-4o'))
    .replace('{id}', id)
}

function queryOf(target: FuzzTarget, ctx: FuzzContext, picks: readonly number[]): string {
  const known = Object.entries((typeof target.query === 'function' ? target.query(ctx) : target.query) ?? {})
  if (known.length === 0 || picks.length === 0) return ''
  const params = picks.map((n) => {
    const [name, values] = known[n % known.length] ?? ['x', ['y']]
    return `${name}=${encodeURIComponent(values[n % values.length] ?? '')}`
  })
  return `?${params.join('&')}`
}

const urlMutation: fc.Arbitrary<{ apply: (path: string) => string; tag: string }> = fc.oneof(
  fc.nat().map((n) => ({
    apply: (p: string) => {
      const cut = 1 + (n % Math.max(1, p.length - 1))
      return `${p.slice(0, cut)}/${p.slice(cut)}`
    },
    tag: 'url-double-slash',
  })),
  fc.constant({ apply: (p: string) => `/${p}`, tag: 'url-leading-double-slash' }),
  fc.nat().map((n) => ({
    apply: (p: string) => {
      const slashes = [...p.matchAll(/\//g)].map((m) => m.index ?? 0).filter((i) => i > 0)
      const at = slashes[n % Math.max(1, slashes.length)] ?? 0
      return at > 0 ? `${p.slice(0, at)}${n % 2 ? '%2F' : '%2f'}${p.slice(at + 1)}` : p
    },
    tag: 'url-encoded-slash',
  })),
  fc
    .constantFrom('/./', '/../', '/%2e%2e/', '/%2E/', '/.%2e/', '/..;/')
    .map((seg) => ({ apply: (p: string) => p.replace('/', seg), tag: 'url-dot-segment' })),
  fc
    .constantFrom('/', '?', '#frag', ';x=1', '%00', '%zz', '%', '%u0041', '%ff', '\\', '/..', '?a=1&a=2&&=&%3D')
    .map((s) => ({ apply: (p: string) => p + s, tag: 'url-suffix' })),
  fc.constant({ apply: (p: string) => p.toUpperCase(), tag: 'url-uppercase' }),
  fc.constant({ apply: (p: string) => p.replaceAll('/', '\\'), tag: 'url-backslashes' }),
  fc.constant({ apply: (p: string) => `http://localhost${p}`, tag: 'url-absolute-form' }),
  fc
    .constantFrom('*', '', 'v2/models', '/\u00e9', '/v2/\u0000', '/v2/ models')
    .map((t) => ({ apply: () => t, tag: 'url-odd-target' })),
  fc
    .integer({ min: 300, max: 70_000 })
    .map((n) => ({ apply: (p: string) => `${p}/${'a'.repeat(n)}`, tag: 'url-long-path' })),
  fc
    .integer({ min: 1000, max: 70_000 })
    .map((n) => ({ apply: (p: string) => `${p}?q=${'b'.repeat(n)}`, tag: 'url-long-query' })),
  fc
    .array(fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 16 })), { minLength: 1, maxLength: 6 })
    .map((pairs) => ({
      apply: (p: string) =>
        `${p}?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`,
      tag: 'url-random-query',
    })),
)

const methodMutation = fc.constantFrom(
  'GET',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'HEAD',
  'OPTIONS',
  'TRACE',
  'CONNECT',
  'get',
  'post',
  'FOO',
  'PRI',
  'G ET',
  'M-SEARCH',
  'PROPFIND',
)
const versionMutation = fc.constantFrom(
  'HTTP/1.0',
  'HTTP/1.0+keep-alive',
  'HTTP/2.0',
  'HTTP/1.2',
  'HTTP/9.9',
  'http/1.1',
  'HTTP/1.1 ',
  'HTTP/1',
  '',
)

export interface Built {
  readonly request: WireRequest
  readonly reusable: boolean
  readonly tags: readonly string[]
}

function requestFor(target: FuzzTarget, ctx: FuzzContext, mix: Mix): fc.Arbitrary<Built> {
  return fc
    .record({
      body: bodyFor(target, ctx),
      auth: authFor(target, ctx, target.auth === 'none' ? 0 : mix.auth),
      site: siteFor(target, mix.auth),
      framing: sometimes(mix.framing, fc.constantFrom(...FRAMINGS)),
      detail: framingDetail,
      junk: sometimes(mix.headers, headerJunk),
      url: sometimes(mix.url, urlMutation),
      pathPick: fc.nat(),
      query: fc.array(fc.nat(), { maxLength: 3 }),
      method: sometimes(mix.method, methodMutation),
      version: sometimes(mix.version, versionMutation),
      extra: routeHeaders(target),
    })
    .map((c) => build(target, ctx, c))
}

/** One of the target's header sets: mostly the usual one, now and then another (a missing or odd value). */
function routeHeaders(target: FuzzTarget): fc.Arbitrary<{ headers: readonly Header[]; tag: string | null }> {
  const sets = target.headers ?? []
  if (sets.length === 0) return fc.constant({ headers: [], tag: null })
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant({ headers: sets[0] ?? [], tag: null }) },
    {
      weight: 1,
      arbitrary: fc.nat(sets.length - 1).map((i) => ({ headers: sets[i] ?? [], tag: `route-headers-${i}` })),
    },
  )
}

interface Choices {
  readonly extra: { readonly headers: readonly Header[]; readonly tag: string | null }
  readonly body: Body
  readonly auth: AuthChoice
  readonly site: AuthChoice
  readonly framing: Framing | null
  readonly detail: { sizes: number[]; ext: boolean; n: number; junk: string }
  readonly junk: { headers: Array<[string, string]>; tag: string } | null
  readonly url: { apply: (path: string) => string; tag: string } | null
  readonly pathPick: number
  readonly query: number[]
  readonly method: string | null
  readonly version: string | null
}

function build(target: FuzzTarget, ctx: FuzzContext, c: Choices): Built {
  const tags = [...c.body.tags]
  const method = c.method ?? target.method
  if (c.method !== null) tags.push(`method-${c.method}`)
  let path = pathOf(target, ctx, c.pathPick) + queryOf(target, ctx, c.query)
  if (c.url !== null) {
    path = c.url.apply(path)
    tags.push(c.url.tag)
  }
  let version = c.version ?? 'HTTP/1.1'
  const headers: Array<readonly [string, string]> = []
  if (version === 'HTTP/1.0+keep-alive') {
    version = 'HTTP/1.0'
    headers.push(['Connection', 'keep-alive'])
  }
  if (c.version !== null) tags.push(`version-${c.version || 'none'}`)
  if (c.junk?.tag !== 'no-host') headers.push(['Host', 'fuzz.local'])
  for (const choice of [c.auth, c.site, c.extra]) {
    headers.push(...choice.headers)
    if (choice.tag !== null) tags.push(choice.tag)
  }
  if (c.body.contentType !== null) headers.push(['Content-Type', c.body.contentType])
  const framing: Framing =
    c.framing ?? (c.body.bytes.length > 0 || method === 'POST' || method === 'PATCH' ? 'length' : 'no-length')
  if (c.framing !== null) tags.push(`framing-${c.framing}`)
  const framed = frame(framing, c.body.bytes, c.detail)
  headers.push(...framed.headers)
  if (c.junk !== null) {
    headers.push(...c.junk.headers)
    tags.push(c.junk.tag)
  }
  const head = `${method} ${path}${version === '' ? '' : ` ${version}`}\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`
  const bytes = Buffer.concat([Buffer.from(head, 'latin1'), framed.body])
  const unsafeHeader =
    c.junk !== null &&
    !c.junk.tag.startsWith('header-expect') &&
    c.junk.tag !== 'hostile-header' &&
    c.junk.tag !== 'no-host'
  const reusable =
    version === 'HTTP/1.1' &&
    c.method === null &&
    c.url === null &&
    !unsafeHeader &&
    !(framing === 'no-length' && framed.body.length > 0) &&
    !BREAKS_CONNECTION.has(framing) &&
    !tags.includes('auth-malformed')
  return { request: { method: method.toUpperCase(), bytes }, reusable, tags }
}

/** One case against one of `targets`: a request, or a few pipelined. */
export function fuzzCase(targets: readonly FuzzTarget[], ctx: FuzzContext, mix: Mix): fc.Arbitrary<FuzzCase> {
  const single = fc.constantFrom(...targets).chain((target) =>
    requestFor(target, ctx, mix).map((b): FuzzCase => ({
      target: target.name,
      requests: [b.request],
      reusable: b.reusable,
      tags: b.tags,
    })),
  )
  // Pipelined: honest requests, back to back in one write; the replies must come in order.
  const plain: Mix = { framing: 0, headers: 0, url: 0, method: 0, version: 0, auth: mix.auth, pipeline: 0 }
  const pipelined = fc
    .array(
      fc.constantFrom(...targets).chain((target) => requestFor(target, ctx, plain).map((b) => ({ target, b }))),
      { minLength: 2, maxLength: 5 },
    )
    .map((list): FuzzCase => ({
      target: list.map((x) => x.target.name).join(' + '),
      requests: list.map((x) => x.b.request),
      reusable: false,
      tags: ['pipelined', ...list.flatMap((x) => x.b.tags)],
    }))
  if (mix.pipeline <= 0) return single
  const weight = Math.max(1, Math.round(mix.pipeline * 1000))
  return fc.oneof({ weight: 1000 - weight, arbitrary: single }, { weight, arbitrary: pipelined })
}
