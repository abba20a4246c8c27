// Hostile JSON: values of every type for any field, numbers JSON.parse turns into
// Infinity or loses precision on, strings with NUL, lone surrogates, invalid UTF-8 and
// pathological runs, duplicate keys, deep nesting, and text that is not JSON at all.
// Values are plain JS values plus two wrappers the serializer writes verbatim, so the
// bytes can be anything a client could send.
import fc from 'fast-check'
import { PATHOLOGICAL_KINDS, pathologicalText } from '../helpers/pathological.ts'

/** Written as these exact bytes where a JSON value goes: numbers JSON cannot hold, broken strings. */
export class Raw {
  readonly bytes: Buffer
  constructor(bytes: Buffer | string) {
    this.bytes = typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes
  }
}

/** An object written with these pairs in this order, duplicate keys included. */
export class Pairs {
  readonly pairs: ReadonlyArray<readonly [string, unknown]>
  constructor(pairs: ReadonlyArray<readonly [string, unknown]>) {
    this.pairs = pairs
  }
}

export function serialize(value: unknown): Buffer {
  const out: Buffer[] = []
  const write = (v: unknown): void => {
    if (v instanceof Raw) out.push(v.bytes)
    else if (v instanceof Pairs) {
      out.push(Buffer.from('{'))
      v.pairs.forEach(([k, item], i) => {
        out.push(Buffer.from(`${i === 0 ? '' : ','}${JSON.stringify(k)}:`))
        write(item)
      })
      out.push(Buffer.from('}'))
    } else if (Array.isArray(v)) {
      out.push(Buffer.from('['))
      v.forEach((item, i) => {
        if (i > 0) out.push(Buffer.from(','))
        write(item)
      })
      out.push(Buffer.from(']'))
    } else if (v !== null && typeof v === 'object') {
      write(new Pairs(Object.entries(v)))
    } else {
      out.push(Buffer.from(JSON.stringify(v) ?? 'null', 'utf8'))
    }
  }
  write(value)
  return Buffer.concat(out)
}

const RAW_NUMBERS = [
  '1e400',
  '-1e400',
  '1e-400',
  '123456789012345678901234567890',
  '-0',
  '0.0000000000000000000001',
  '9007199254740993',
  '1E5',
  '1.',
  '.5',
  '01',
  '0x10',
  '+1',
  'NaN',
  'Infinity',
  '-',
  '1e',
  '1'.repeat(1000),
]

export const hostileNumber: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(
    0,
    -1,
    1,
    2,
    1.5,
    2 ** 31,
    2 ** 32,
    2 ** 53,
    -(2 ** 53),
    1e21,
    1e308,
    -1e308,
    5e-324,
    65_536,
    65_537,
    262_145,
  ),
  fc.constantFrom(...RAW_NUMBERS).map((text) => new Raw(text)),
)

const NASTY_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  '\ud83d',
  '\u{1F600}',
  '\u202e',
  '\ufeff',
  '\u200b',
  '../../etc/passwd',
  '..\\..\\windows',
  '%00',
  '%2e%2e%2f',
  '<script>alert(1)</script>',
  '${jndi:ldap://x/a}',
  '{{7*7}}',
  "' OR 1=1 --",
  '\r\nX-Injected: 1',
  '__proto__',
  'constructor',
  'prototype',
  'null',
  'true',
  'gpt-4o\u0000',
  'GPT-4O',
  ' gpt-4o',
  'tg1_' + 'A'.repeat(49),
  'Bearer x',
  '\\',
  '"',
  '\\u0000',
]

/** Raw bytes inside quotes: invalid UTF-8, a raw NUL or newline (JSON forbids raw control characters), a bad escape. */
const brokenString: fc.Arbitrary<unknown> = fc.oneof(
  fc
    .uint8Array({ maxLength: 40 })
    .map(
      (bytes) =>
        new Raw(
          Buffer.concat([
            Buffer.from('"'),
            Buffer.from(bytes.filter((b) => b !== 0x22 && b !== 0x5c)),
            Buffer.from('"'),
          ]),
        ),
    ),
  fc
    .constantFrom(
      '"\u0000"',
      '"a\nb"',
      '"\\x41"',
      '"\\u12"',
      '"\\ud800\\u0041"',
      '"unterminated',
      '"\xff\xfe\xc3\x28"',
      '"\xed\xa0\x80"',
    )
    .map((s) => new Raw(s)),
)

export const hostileString: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 16, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 8, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 4, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  { weight: 12, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('a', ' ', '\u{1F600}', '\u0000', '9'), fc.integer({ min: 1_000, max: 100_000 }))
      .map(([c, n]) => c.repeat(n)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...PATHOLOGICAL_KINDS), fc.integer({ min: 256, max: 32 * 1024 }), fc.nat())
      .map(([kind, bytes, seed]) => pathologicalText(kind, bytes, seed)),
  },
  { weight: 8, arbitrary: brokenString },
)

/** Deep nesting: arrays, objects, or a mix, as raw text (building it as values would overflow the serializer). */
export const deepNesting: fc.Arbitrary<unknown> = fc
  .tuple(fc.constantFrom('[', '{"a":', '[{"a":'), fc.integer({ min: 100, max: 100_000 }))
  .map(([open, depth]) => {
    const close = open === '[' ? ']' : open === '{"a":' ? '}' : '}]'
    return new Raw(open.repeat(depth) + '1' + close.repeat(depth))
  })

export const fieldName: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    'model',
    'messages',
    'stream',
    'stream_options',
    'max_tokens',
    'n',
    'best_of',
    'input',
    'prompt',
    '__proto__',
    'constructor',
    'toString',
    '',
    'a'.repeat(300),
  ),
  fc.string({ maxLength: 12 }),
)

/** Any JSON value, of any type, nested a little. */
export const hostileValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    hostileNumber,
    hostileString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.array(fc.tuple(fieldName, tie('value')), { maxLength: 4 }).map((pairs) => new Pairs(pairs)),
  ),
})).value

/** Whole bodies that are not a JSON object: other values, garbage, nothing. */
export const notAnObject: fc.Arbitrary<unknown> = fc.oneof(
  hostileValue,
  deepNesting,
  fc.uint8Array({ maxLength: 200 }).map((bytes) => new Raw(Buffer.from(bytes))),
  fc
    .constantFrom(
      '',
      ' ',
      'null',
      '{',
      '}',
      '{"a":1,}',
      "{'a':1}",
      '{"a":1}{"b":2}',
      '\ufeff{}',
      '{"a":1} trailing',
      '\u0000{}',
    )
    .map((s) => new Raw(Buffer.from(s, 'utf8'))),
)

/** Text a JSON body may be cut to: valid framing, invalid JSON. */
export function truncate(bytes: Buffer, at: number): Buffer {
  return bytes.subarray(0, Math.min(bytes.length - 1, Math.max(0, at)))
}
