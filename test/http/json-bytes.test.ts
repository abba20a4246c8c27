// A JSON body forwarded as the client's bytes, or patched at the byte level
// (src/http/json-bytes.ts): the layout finds the top-level members whatever the
// formatting, a patch parses to exactly the value the gateway would have serialised, and
// bytes that could mean something else upstream (a duplicated member, invalid UTF-8) are
// never forwarded.
import fc from 'fast-check'
import t from 'tap'
import { forwardableLayout, layoutOf, patchTopLevel, wireBytes } from '../../src/http/json-bytes.ts'

const bytes = (text: string): Buffer => Buffer.from(text, 'utf8')

/** Members at every depth of a parsed value (what the body reader counts). */
function membersOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0
  const children = Object.values(value)
  return (Array.isArray(value) ? 0 : children.length) + children.reduce<number>((n, c) => n + membersOf(c), 0)
}

const received = (text: string): { bytes: Buffer; members: number } => ({
  bytes: bytes(text),
  members: membersOf(JSON.parse(text)),
})

t.test('the layout names each top-level member and where its value lies', async (t) => {
  const text = ' {"model" : "a\\"b", "n":[1,{"model":2}] ,"o":{"x":"}"},"e":{} } '
  const layout = layoutOf(bytes(text))
  t.same(
    layout.top.map((m) => [m.name, text.slice(m.start, m.end)]),
    [
      ['model', '"a\\"b"'],
      ['n', '[1,{"model":2}]'],
      ['o', '{"x":"}"}'],
      ['e', '{}'],
    ],
  )
  t.equal(layout.members, 6, 'members at every depth')
  t.equal(text[layout.close], '}')
  t.equal(layout.close, text.length - 2)
})

t.test('an escaped member name is read as JSON reads it', async (t) => {
  const layout = layoutOf(bytes('{"mod\\u0065l":"m","a\\\\":1}'))
  t.same(
    layout.top.map((m) => m.name),
    ['model', 'a\\'],
  )
})

t.test('a patch replaces a member in place and adds a missing one at the end', async (t) => {
  const text = '{ "model":"public",\n  "messages":[{"role":"user","content":"model"}], "big": 12345678901234567890 }'
  const layout = layoutOf(bytes(text))
  const patched = patchTopLevel(
    bytes(text),
    layout,
    new Map([
      ['model', '"upstream"'],
      ['stream_options', '{"include_usage":true}'],
    ]),
  ).toString('utf8')
  t.equal(
    patched,
    '{ "model":"upstream",\n  "messages":[{"role":"user","content":"model"}], "big": 12345678901234567890 ,"stream_options":{"include_usage":true}}',
    'the rest byte for byte: the formatting and a number beyond a double',
  )
  t.equal(patchTopLevel(bytes('{}'), layoutOf(bytes('{}')), new Map([['a', '1']])).toString(), '{"a":1}')
})

t.test('bytes that could mean something else upstream are not forwarded', async (t) => {
  const dup = '{"file_id":"theirs","file_id":"mine"}'
  t.equal(forwardableLayout(bytes(dup), membersOf(JSON.parse(dup))), undefined, 'a duplicated top-level member')
  const deep = '{"tools":[{"type":"file_search","vector_store_ids":["a"],"vector_store_ids":["b"]}]}'
  t.equal(forwardableLayout(bytes(deep), membersOf(JSON.parse(deep))), undefined, 'a duplicate deep inside')
  const invalid = Buffer.concat([bytes('{"a":"'), Buffer.from([0xff, 0xfe]), bytes('"}')])
  t.equal(forwardableLayout(invalid, 1), undefined, 'invalid UTF-8')
  t.equal(wireBytes(received(dup), new Map()), undefined)
  const fine = received('{"a":[{"b":1},{"b":2}],"c":"\\"b\\":"}')
  t.equal(wireBytes(fine, new Map()), fine.bytes, 'the same name in sibling objects is no duplicate')
})

t.test('wire bytes parse to the value the gateway would have sent, whatever the formatting', async (t) => {
  const json = fc.jsonValue({ maxDepth: 4 })
  const top = fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 6 })
  const changes = fc.dictionary(fc.constantFrom('model', 'stream_options', 'x', ''), json, { maxKeys: 3 })
  fc.assert(
    fc.property(top, changes, fc.integer({ min: 0, max: 3 }), (value, change, indent) => {
      const text = JSON.stringify(value, null, indent)
      const wire = wireBytes(received(text), new Map(Object.entries(change)))
      if (wire === undefined) return false
      const want = JSON.parse(JSON.stringify({ ...value, ...change })) as unknown
      const got = JSON.parse(wire.toString('utf8')) as unknown
      t.same(got, want)
      t.same(Object.keys(got as object), Object.keys(want as object), 'members keep their order')
      return true
    }),
    { numRuns: 300 },
  )
})
