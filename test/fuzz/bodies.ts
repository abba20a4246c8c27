// Request bodies for a target: its template with fields replaced by wrong types, removed
// or added; plausible variations that succeed (streams, several choices, pathological
// prompts); things that are not a JSON object at all; and multipart forms with bad
// boundaries, broken part headers, thousands of parts or none.
import fc from 'fast-check'
import type { Part } from '../helpers/multipart.ts'
import { PATHOLOGICAL_KINDS, pathologicalText } from '../helpers/pathological.ts'
import {
  Pairs,
  Raw,
  deepNesting,
  fieldName,
  hostileNumber,
  hostileString,
  hostileValue,
  notAnObject,
  serialize,
} from './json-values.ts'
import type { FuzzContext, FuzzTarget } from './targets.ts'

export interface Body {
  readonly bytes: Buffer
  /** The Content-Type the body goes with; null for none. */
  readonly contentType: string | null
  readonly tags: readonly string[]
}

const DELETE = Symbol('delete')

/** Values a field of that name plausibly takes, so mutations of other fields still get deep. */
function plausible(field: string, ctx: FuzzContext): fc.Arbitrary<unknown> {
  const models = Object.values(ctx.models).flat()
  switch (field) {
    case 'model':
      return fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...models) }, { weight: 1, arbitrary: hostileString })
    case 'max_tokens':
    case 'max_completion_tokens':
    case 'max_output_tokens':
      return fc.oneof(
        { weight: 6, arbitrary: fc.integer({ min: 1, max: 64 }) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 70_000 }) },
        { weight: 1, arbitrary: hostileNumber },
      )
    case 'n':
    case 'best_of':
      return fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 4 }) }, { weight: 1, arbitrary: hostileNumber })
    case 'stream':
      return fc.boolean()
    case 'stream_options':
      return fc.oneof(fc.constant(null), fc.record({ include_usage: fc.boolean() }), hostileValue)
    case 'messages':
      return messages
    case 'prompt':
    case 'input':
      return promptLike
    default:
      return hostileValue
  }
}

// The tokenizer-stall prompts (a run of one letter, random bytes, emoji) are rare but
// large: each costs the gateway its bounded count.
const content: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 24, arbitrary: fc.string({ maxLength: 60 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...PATHOLOGICAL_KINDS), fc.integer({ min: 1024, max: 48 * 1024 }), fc.nat())
      .map(([kind, bytes, seed]) => pathologicalText(kind, bytes, seed)),
  },
  {
    weight: 4,
    arbitrary: fc.array(
      fc.record({ type: fc.constantFrom('text', 'image_url', 'input_text', 'x'), text: hostileString }),
      { maxLength: 3 },
    ),
  },
  { weight: 4, arbitrary: hostileValue },
)

const messages: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.array(
      fc.record({ role: fc.constantFrom('system', 'user', 'assistant', 'tool', 'developer'), content }),
      { minLength: 1, maxLength: 4 },
    ),
  },
  {
    weight: 1,
    arbitrary: fc.array(fc.record({ role: hostileValue, content: hostileValue }, { requiredKeys: [] }), {
      maxLength: 3,
    }),
  },
  { weight: 1, arbitrary: hostileValue },
)

const promptLike: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: content },
  { weight: 1, arbitrary: fc.array(fc.string({ maxLength: 20 }), { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.array(fc.integer({ min: -5, max: 300_000 }), { maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.array(fc.array(fc.integer({ min: 0, max: 100_000 }), { maxLength: 4 }), { maxLength: 3 }),
  },
)

/** The template with some fields set to other values (any type), removed, or added. */
function mutatedTemplate(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<{ value: unknown; tags: string[] }> {
  const template = target.template?.(ctx) ?? {}
  const fields = Object.keys(template)
  const field =
    fields.length > 0
      ? fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...fields) }, { weight: 1, arbitrary: fieldName })
      : fieldName
  const change = field.chain((name) =>
    fc.tuple(
      fc.constant(name),
      fc.oneof(
        { weight: 12, arbitrary: plausible(name, ctx) },
        { weight: 12, arbitrary: hostileValue },
        { weight: 1, arbitrary: deepNesting },
        { weight: 4, arbitrary: fc.constant<unknown>(DELETE) },
      ),
    ),
  )
  return fc.tuple(fc.array(change, { maxLength: 4 }), fc.boolean()).map(([changes, duplicate]) => {
    const pairs: Array<readonly [string, unknown]> = Object.entries(template)
    for (const [name, value] of changes) {
      const at = pairs.findIndex(([k]) => k === name)
      if (value === DELETE) {
        if (at !== -1) pairs.splice(at, 1)
      } else if (at === -1) pairs.push([name, value])
      else pairs[at] = [name, value]
    }
    // A repeated key: JSON.parse keeps the last; everything downstream must agree on it.
    const first = changes[0]
    if (duplicate && first !== undefined && first[1] !== DELETE) pairs.unshift([first[0], template[first[0]] ?? null])
    return { value: new Pairs(pairs), tags: changes.length === 0 ? ['template'] : ['mutated'] }
  })
}

/** The template as it is, with plausible values: these mostly succeed, streams included. */
function plausibleTemplate(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<{ value: unknown; tags: string[] }> {
  const template = target.template?.(ctx) ?? {}
  const overrides: Record<string, fc.Arbitrary<unknown>> = {}
  for (const name of Object.keys(template)) {
    if (['model', 'messages', 'prompt', 'input', 'max_tokens', 'max_output_tokens', 'stream', 'n'].includes(name))
      overrides[name] = plausible(name, ctx)
  }
  return fc.record(overrides, { requiredKeys: [] }).map((changed) => {
    const value: Record<string, unknown> = { ...template, ...changed }
    if (value.stream !== true) delete value.stream_options
    return { value, tags: ['plausible'] }
  })
}

/** A JSON body for the target, as bytes. */
export function jsonBody(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<Body> {
  const value = fc.oneof(
    { weight: 5, arbitrary: mutatedTemplate(target, ctx) },
    { weight: 3, arbitrary: plausibleTemplate(target, ctx) },
    { weight: 1, arbitrary: notAnObject.map((v) => ({ value: v, tags: ['not-an-object'] })) },
  )
  const contentType = fc.oneof(
    { weight: 12, arbitrary: fc.constant('application/json') },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        'application/json; charset=utf-8',
        'APPLICATION/JSON',
        'application/json; charset=utf-16',
        'application/vnd.api+json',
        'application/json;;',
        'application/json, text/plain',
      ),
    },
  )
  // Cut at a random point (framing still tells the truth): invalid JSON of any shape.
  const cut = fc.oneof({ weight: 12, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat() })
  // Over the gateway's JSON limit (the fuzz gateway sets it to 256 KiB).
  const oversize = fc.oneof(
    { weight: 40, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 300_000, max: 600_000 }) },
  )
  return fc.tuple(value, contentType, cut, oversize).map(([{ value: v, tags }, type, at, pad]) => {
    let bytes = serialize(
      pad > 0
        ? new Pairs([
            ['model', 'x'],
            ['padding', 'x'.repeat(pad)],
          ])
        : v,
    )
    const all = [...tags]
    if (pad > 0) all.push('oversize')
    if (at >= 0 && bytes.length > 1) {
      bytes = bytes.subarray(0, at % bytes.length)
      all.push('truncated-json')
    }
    return { bytes, contentType: type, tags: all }
  })
}

// Multipart.

interface FormPart {
  readonly headers: readonly string[]
  readonly content: Buffer
}

const toFormPart = (part: Part): FormPart =>
  'value' in part
    ? { headers: [`Content-Disposition: form-data; name="${part.name}"`], content: Buffer.from(part.value, 'utf8') }
    : {
        headers: [
          `Content-Disposition: form-data; name="${part.name}"; filename="${part.filename}"`,
          `Content-Type: ${part.contentType ?? 'application/octet-stream'}`,
        ],
        content: part.data,
      }

const hostileText = (): fc.Arbitrary<string> =>
  hostileString.map((v) => (typeof v === 'string' ? v : v instanceof Raw ? v.bytes.toString('latin1') : String(v)))

const extraPart: fc.Arbitrary<FormPart> = fc.oneof(
  fc.tuple(hostileText(), hostileText()).map(([name, value]) => ({
    headers: [`Content-Disposition: form-data; name="${name.slice(0, 200)}"`],
    content: Buffer.from(value.slice(0, 5000)),
  })),
  fc
    .tuple(fc.constantFrom('model', 'stream', 'file', 'purpose', 'response_format', 'image'), hostileText())
    .map(([name, value]) => ({
      headers: [`Content-Disposition: form-data; name="${name}"`],
      content: Buffer.from(value.slice(0, 5000)),
    })),
  fc
    .tuple(fc.constantFrom('file', 'image', 'image[]', 'mask', 'x'), hostileText(), fc.uint8Array({ maxLength: 2000 }))
    .map(([name, filename, data]) => ({
      headers: [
        `Content-Disposition: form-data; name="${name}"; filename="${filename.slice(0, 200)}"`,
        'Content-Type: application/octet-stream',
      ],
      content: Buffer.from(data),
    })),
  fc.constantFrom<FormPart>(
    { headers: [], content: Buffer.from('no disposition') },
    { headers: ['Content-Disposition: attachment'], content: Buffer.from('x') },
    { headers: ['Content-Disposition: form-data'], content: Buffer.from('no name') },
    { headers: ['Content-Disposition: form-data; name=model; name=other'], content: Buffer.from('x') },
    {
      headers: ['Content-Disposition: form-data; name="file"; filename*=UTF-8\'\'%E2%82%AC%00.wav'],
      content: Buffer.from('RIFF'),
    },
    { headers: ['Content-Disposition: form-data; name="big"'], content: Buffer.alloc(70 * 1024, 0x61) },
    {
      headers: ['Content-Disposition: form-data; name="x"', 'Content-Type: multipart/mixed; boundary=inner'],
      content: Buffer.from('--inner\r\n\r\nx\r\n--inner--'),
    },
    { headers: ['Content-Disposition: form-data; name="x"\u0000'], content: Buffer.from('nul in a header') },
  ),
)

const boundaryToken = fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/)
/** Legal in a boundary, but only inside quotes in the Content-Type header. */
const specialBoundary = fc.stringMatching(/^[A-Za-z0-9'()+_,./:=?-]{1,40}$/)

export function multipartBody(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<Body> {
  const base = (target.form?.(ctx) ?? []).map(toFormPart)
  const parts = fc
    .tuple(
      // Mostly the whole form, so that the call gets past the checks of its fields.
      fc.oneof(
        { weight: 3, arbitrary: fc.constant(base.map((_, i) => i)) },
        {
          weight: 1,
          arbitrary: fc.subarray(
            base.map((_, i) => i),
            { minLength: 0 },
          ),
        },
      ),
      fc.oneof(
        { weight: 2, arbitrary: fc.constant([]) },
        { weight: 1, arbitrary: fc.array(extraPart, { maxLength: 4 }) },
      ),
      // Thousands of parts, now and then.
      fc.oneof(
        { weight: 30, arbitrary: fc.constant(0) },
        { weight: 1, arbitrary: fc.integer({ min: 900, max: 4000 }) },
      ),
    )
    .map(([kept, extra, many]) => {
      const list = [...kept.map((i) => base[i]!), ...extra]
      for (let i = 0; i < many; i++)
        list.push({ headers: [`Content-Disposition: form-data; name="f${i}"`], content: Buffer.from('x') })
      return { list, many: many > 0, complete: kept.length === base.length }
    })
  const boundary = fc.oneof(
    { weight: 8, arbitrary: boundaryToken.map((b) => ({ header: b, body: b, tag: 'boundary' })) },
    { weight: 1, arbitrary: fc.constant({ header: 'x'.repeat(200), body: 'x'.repeat(200), tag: 'long-boundary' }) },
    {
      weight: 1,
      arbitrary: fc
        .tuple(boundaryToken, boundaryToken)
        .map(([a, b]) => ({ header: a, body: `${b}z`, tag: 'mismatched-boundary' })),
    },
    {
      weight: 1,
      arbitrary: specialBoundary.map((b) => ({ header: `"${b}"`, body: b, tag: 'quoted-special-boundary' })),
    },
    { weight: 1, arbitrary: specialBoundary.map((b) => ({ header: b, body: b, tag: 'unquoted-special-boundary' })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        { header: '', body: '', tag: 'empty-boundary' },
        { header: '"quoted boundary"', body: 'quoted boundary', tag: 'quoted-boundary' },
        { header: 'a b', body: 'a b', tag: 'space-boundary' },
        { header: '--', body: '--', tag: 'dash-boundary' },
        { header: 'é', body: 'é', tag: 'unicode-boundary' },
      ),
    },
  )
  const layout = fc.record({
    eol: fc.oneof({ weight: 10, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constant('\n') }),
    ending: fc.oneof(
      { weight: 10, arbitrary: fc.constant('close') },
      { weight: 1, arbitrary: fc.constantFrom('missing', 'junk', 'preamble') },
    ),
    contentType: fc.oneof(
      { weight: 12, arbitrary: fc.constant('standard') },
      { weight: 1, arbitrary: fc.constantFrom('no-boundary', 'mixed', 'uppercase', 'json') },
    ),
  })
  return fc.tuple(parts, boundary, layout).map(([{ list, many, complete }, b, { eol, ending, contentType }]) => {
    const chunks: Buffer[] = []
    if (ending === 'preamble') chunks.push(Buffer.from(`preamble text${eol}`))
    for (const part of list) {
      chunks.push(
        Buffer.from(`--${b.body}${eol}${part.headers.map((h) => `${h}${eol}`).join('')}${eol}`, 'utf8'),
        part.content,
        Buffer.from(eol),
      )
    }
    if (ending === 'close' || ending === 'preamble') chunks.push(Buffer.from(`--${b.body}--${eol}`))
    if (ending === 'junk') chunks.push(Buffer.from(`--${b.body}-- and then some${eol}\u0000\u00ff`, 'latin1'))
    const type =
      contentType === 'standard'
        ? `multipart/form-data; boundary=${b.header}`
        : contentType === 'no-boundary'
          ? 'multipart/form-data'
          : contentType === 'mixed'
            ? `multipart/mixed; boundary=${b.header}`
            : contentType === 'uppercase'
              ? `MULTIPART/FORM-DATA; BOUNDARY=${b.header}`
              : 'application/json'
    const tags = [
      b.tag,
      ...(many ? ['thousands-of-parts'] : []),
      ...(complete ? [] : ['parts-missing']),
      ...(eol === '\n' ? ['lf-only'] : []),
      ...(ending === 'close' ? [] : [`ending-${ending}`]),
      ...(contentType === 'standard' ? [] : [`type-${contentType}`]),
    ]
    return { bytes: Buffer.concat(chunks), contentType: type, tags }
  })
}

// URL-encoded forms (the portal's). Names and values are written as they go on the wire:
// mostly percent-encoded as a browser would, sometimes broken.

/** Form values a browser would never send, already in wire form. */
const HOSTILE_FORM_VALUES = [
  '',
  '%00',
  'a%00b',
  '%zz',
  '%',
  '%e',
  '%E9',
  '%C3',
  '%ED%A0%80',
  '%F0%9F%98',
  '%FF%FE',
  '+',
  '%20%20',
  '%3Cscript%3E',
  'a=b',
  'a&',
  '%26%3D',
  '-1',
  '0',
  '1e309',
  '99999999999999999999',
  '1.5',
  'NaN',
  'true',
  'null',
  '%5B%5D',
  '%7B%7D',
  '\u00e9\u00ff',
  '\u0000',
]

const formValue: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...HOSTILE_FORM_VALUES) },
  { weight: 3, arbitrary: fc.string({ maxLength: 40 }).map(encodeURIComponent) },
  { weight: 2, arbitrary: hostileText().map((v) => Buffer.from(v.slice(0, 5000), 'utf8').toString('latin1')) },
  // Near and over the portal's 64 KiB form limit.
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 90_000 }).map((n) => 'v'.repeat(n)) },
)

type FormPair = readonly [string, string]

/** The target's fields with plausible values, the CSRF token of its session first; then fields removed, changed, repeated or added. */
export function formBody(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<Body> {
  const credential = ctx.credentials[target.auth]
  const known: Array<readonly [string, readonly string[]]> = Object.entries(target.fields?.(ctx) ?? {})
  if (credential?.header === 'cookie') known.unshift(['_csrf', [credential.csrf]])
  const names = known.map(([name]) => name)
  const plausibleForm = fc.tuple(
    ...known.map(([name, values]) =>
      fc
        .oneof(
          { weight: 3, arbitrary: fc.constant(values[0] ?? '') },
          { weight: 1, arbitrary: fc.constantFrom(...values) },
        )
        .map((v): FormPair => [name, encodeURIComponent(v)]),
    ),
  )
  const name =
    names.length > 0
      ? fc.oneof(
          { weight: 4, arbitrary: fc.constantFrom(...names) },
          { weight: 1, arbitrary: fc.constantFrom('x', '', '_CSRF', '_csrf[]', '%00', '%zz', 'a%3Db') },
        )
      : fc.constantFrom('x', '_csrf')
  // A repeated field goes before the usual one (the form's reader takes the first, so the
  // odd value is the one used) or after it (the odd value must be ignored).
  const change = fc.tuple(
    name,
    fc.oneof(
      { weight: 4, arbitrary: formValue.map((value) => ({ kind: 'set' as const, value })) },
      { weight: 2, arbitrary: fc.constant({ kind: 'delete' as const, value: '' }) },
      { weight: 1, arbitrary: formValue.map((value) => ({ kind: 'repeat-before' as const, value })) },
      { weight: 1, arbitrary: formValue.map((value) => ({ kind: 'repeat-after' as const, value })) },
    ),
  )
  const mutated = fc.tuple(plausibleForm, fc.array(change, { maxLength: 3 })).map(([pairs, changes]) => {
    const out: FormPair[] = [...pairs]
    for (const [field, { kind, value }] of changes) {
      const at = out.findIndex(([k]) => k === field)
      if (kind === 'delete') {
        if (at !== -1) out.splice(at, 1)
      } else if (kind === 'repeat-before') out.splice(Math.max(0, at), 0, [field, value])
      else if (kind === 'set' && at !== -1) out[at] = [field, value]
      else out.push([field, value])
    }
    return {
      pairs: out,
      tags: changes.length === 0 ? ['form'] : [...new Set(changes.map(([, c]) => `form-${c.kind}`))],
    }
  })
  // Thousands of fields, now and then: URLSearchParams keeps them all.
  const many = fc.oneof(
    { weight: 30, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1000, max: 8000 }) },
  )
  const layout = fc.record({
    separator: fc.oneof(
      { weight: 20, arbitrary: fc.constant('&') },
      { weight: 1, arbitrary: fc.constantFrom('&&', ';', '&amp;', '\n') },
    ),
    plainNames: fc.oneof({ weight: 20, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
    contentType: fc.oneof(
      { weight: 20, arbitrary: fc.constant<string | null>('application/x-www-form-urlencoded') },
      {
        weight: 1,
        arbitrary: fc.constantFrom<string | null>(
          'application/x-www-form-urlencoded; charset=utf-8',
          'APPLICATION/X-WWW-FORM-URLENCODED',
          'application/x-www-form-urlencoded; charset=latin1',
          'text/plain',
          'multipart/form-data; boundary=x',
          'application/json',
          'application/x-www-form-urlencoded, text/plain',
          '',
          null,
        ),
      },
    ),
    cut: fc.oneof({ weight: 20, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat() }),
  })
  return fc.tuple(mutated, many, layout).map(([{ pairs, tags }, n, { separator, plainNames, contentType, cut }]) => {
    const all = [...pairs]
    for (let i = 0; i < n; i++) all.push([`f${i}`, 'x'])
    // A name with no "=" is a field with an empty value; some parsers disagree.
    let text = all.map(([k, v]) => (plainNames || v !== '' ? `${k}=${v}` : k)).join(separator)
    const out = [...tags]
    if (n > 0) out.push('thousands-of-fields')
    if (separator !== '&') out.push('form-separator')
    if (!plainNames) out.push('form-bare-names')
    if (contentType !== 'application/x-www-form-urlencoded') out.push('form-content-type')
    if (cut >= 0 && text.length > 1) {
      text = text.slice(0, cut % text.length)
      out.push('form-truncated')
    }
    return { bytes: Buffer.from(text, 'latin1'), contentType, tags: out }
  })
}

/** A body where none is expected (a GET with one), or nothing. */
export const strayBody: fc.Arbitrary<Body> = fc.oneof(
  { weight: 12, arbitrary: fc.constant<Body>({ bytes: Buffer.alloc(0), contentType: null, tags: [] }) },
  {
    weight: 1,
    arbitrary: fc
      .uint8Array({ minLength: 1, maxLength: 300 })
      .map((b) => ({ bytes: Buffer.from(b), contentType: 'application/octet-stream', tags: ['stray-body'] })),
  },
  {
    weight: 1,
    arbitrary: hostileValue.map((v) => ({
      bytes: serialize(v),
      contentType: 'application/json',
      tags: ['stray-json'],
    })),
  },
)

export function bodyFor(target: FuzzTarget, ctx: FuzzContext): fc.Arbitrary<Body> {
  switch (target.body) {
    case 'json':
      return jsonBody(target, ctx)
    case 'optional-json':
      return fc.oneof(jsonBody(target, ctx), strayBody)
    case 'multipart':
      return fc.oneof(
        { weight: 8, arbitrary: multipartBody(target, ctx) },
        { weight: 1, arbitrary: jsonBody({ ...target, template: () => ({ model: 'whisper-large-v3' }) }, ctx) },
      )
    case 'form':
      return fc.oneof({ weight: 12, arbitrary: formBody(target, ctx) }, { weight: 1, arbitrary: strayBody })
    case 'none':
      return strayBody
  }
}
