// The mock's value generator (tool-call arguments, structured output): whatever the
// schema, the value validates against it (checked by ajv, and by zod for the schemas the
// SDK's zod helpers make), and the same schema always gets the same value.
import { Ajv, type AnySchema } from 'ajv'
import { Ajv2020 } from 'ajv/dist/2020.js'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { z } from 'zod'
import { valueFor } from '../../src/backends/mock/schema-values.ts'

// Formats are checked by zod below (its patterns ride along in the schemas); ajv checks the rest.
const draft07 = new Ajv({ strict: false, validateFormats: false })
const draft2020 = new Ajv2020({ strict: false, validateFormats: false })

function check(t: Test, schema: Record<string, unknown>, name: string): unknown {
  const ajv = typeof schema.$schema === 'string' && schema.$schema.includes('draft-07') ? draft07 : draft2020
  const { $schema: _ignored, ...rest } = schema
  const validate = ajv.compile(rest as AnySchema)
  // A first reply finds what its patterns match (under a time budget, which a busy machine
  // can spend); what it found is kept, so the replies after it agree.
  valueFor(structuredClone(schema))
  const value = valueFor(schema)
  t.ok(validate(value), `${name}: ${JSON.stringify(value)} ${JSON.stringify(validate.errors ?? [])}`)
  t.same(valueFor(structuredClone(schema)), value, `${name}: the same schema gets the same value`)
  return value
}

t.test('hand-written schemas of every kind', async (t) => {
  const schemas: Record<string, Record<string, unknown>> = {
    // From the provider's function-calling guide: the weather tool's parameters.
    weather: {
      type: 'object',
      properties: { location: { type: 'string' }, format: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['location', 'format'],
    },
    noParameters: { type: 'object', properties: {} },
    scalars: {
      type: 'object',
      properties: {
        b: { type: 'boolean' },
        n: { type: 'null' },
        i: { type: 'integer' },
        x: { type: 'number' },
        c: { const: 42 },
        e: { enum: [3, 'three'] },
        nullable: { type: ['string', 'null'] },
        anything: {},
      },
      required: ['b', 'n', 'i', 'x', 'c', 'e', 'nullable', 'anything'],
      additionalProperties: false,
    },
    bounds: {
      type: 'object',
      properties: {
        small: { type: 'integer', minimum: -10, maximum: -3 },
        big: { type: 'integer', minimum: 1000 },
        open: { type: 'number', exclusiveMinimum: 0, exclusiveMaximum: 1 },
        step: { type: 'integer', minimum: 11, multipleOf: 7 },
        fraction: { type: 'number', multipleOf: 0.25, minimum: 2.1 },
        negativeOnly: { type: 'number', maximum: -100.5 },
      },
      required: ['small', 'big', 'open', 'step', 'fraction', 'negativeOnly'],
    },
    strings: {
      type: 'object',
      properties: {
        short: { type: 'string', maxLength: 3 },
        long: { type: 'string', minLength: 40 },
        code: { type: 'string', pattern: '^[0-9]+$' },
        upper: { type: 'string', pattern: '^[A-Z]+$' },
      },
      required: ['short', 'long', 'code', 'upper'],
    },
    arrays: {
      type: 'object',
      properties: {
        tags: { type: 'array', items: { type: 'string' }, minItems: 3, uniqueItems: true },
        codes: { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 3, maxItems: 3, uniqueItems: true },
        numbers: { type: 'array', items: { type: 'integer' }, minItems: 2, uniqueItems: true },
        empty: { type: 'array', maxItems: 0 },
        tuple: { type: 'array', prefixItems: [{ type: 'integer' }, { type: 'string' }], items: false },
        objects: {
          type: 'array',
          items: {
            type: 'object',
            properties: { id: { type: 'integer' }, name: { type: 'string' } },
            required: ['id', 'name'],
          },
          minItems: 2,
          uniqueItems: true,
        },
      },
      required: ['tags', 'codes', 'numbers', 'empty', 'tuple', 'objects'],
    },
    objects: {
      type: 'object',
      properties: {
        map: { type: 'object', additionalProperties: { type: 'integer' }, minProperties: 2 },
        capped: {
          type: 'object',
          properties: { a: { type: 'string' }, b: { type: 'string' }, c: { type: 'string' } },
          maxProperties: 1,
        },
        proto: { type: 'object', properties: { ['__proto__']: { type: 'string' } }, required: ['__proto__'] },
      },
      required: ['map', 'capped', 'proto'],
    },
    combinators: {
      type: 'object',
      properties: {
        either: { anyOf: [{ type: 'null' }, { type: 'integer', minimum: 5 }] },
        one: { oneOf: [{ type: 'string', maxLength: 2 }, { type: 'integer' }] },
        both: {
          allOf: [
            { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] },
            { properties: { b: { type: 'integer' } }, required: ['b'] },
          ],
        },
      },
      required: ['either', 'one', 'both'],
    },
    references: {
      $defs: {
        Point: {
          type: 'object',
          properties: { x: { type: 'number' }, y: { type: 'number' } },
          required: ['x', 'y'],
          additionalProperties: false,
        },
      },
      type: 'object',
      properties: {
        from: { $ref: '#/$defs/Point' },
        to: { $ref: '#/$defs/Point' },
        path: { type: 'array', items: { $ref: '#/$defs/Point' }, minItems: 2 },
      },
      required: ['from', 'to', 'path'],
    },
    recursive: {
      $defs: {
        Node: {
          type: 'object',
          properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } },
          required: ['name', 'children'],
        },
      },
      $ref: '#/$defs/Node',
    },
    recursiveNullable: {
      type: 'object',
      properties: { value: { type: 'integer' }, next: { anyOf: [{ $ref: '#' }, { type: 'null' }] } },
      required: ['value', 'next'],
      additionalProperties: false,
    },
    typeless: { properties: { a: { minimum: 3 }, b: { items: { type: 'boolean' } } }, required: ['a', 'b'] },
  }
  for (const [name, schema] of Object.entries(schemas)) check(t, schema, name)

  t.same(
    valueFor(schemas.weather),
    { location: 'sample location', format: 'celsius' },
    'strings say what they are; enums take their first value',
  )
  // Draft-04 bounds (booleans beside minimum/maximum), which ajv 8 no longer reads.
  const draft4 = valueFor({ type: 'number', minimum: 5, exclusiveMinimum: true, maximum: 6, exclusiveMaximum: true })
  t.ok(typeof draft4 === 'number' && draft4 > 5 && draft4 < 6, `draft-04 exclusive bounds: ${String(draft4)}`)
  const recursive = valueFor(schemas.recursiveNullable)
  t.ok(JSON.stringify(recursive).length < 10_000, 'a recursion ends')
  t.equal(valueFor(false), null, 'a schema nothing satisfies gets null, and no exception')
  t.equal(typeof valueFor(undefined), 'string', 'no schema: any value will do')
})

t.test(
  'schemas the SDK zod helpers make: zod itself accepts the value (formats and their patterns included)',
  async (t) => {
    const Address = z.object({
      street: z.string(),
      city: z.string(),
      zip: z
        .string()
        .regex(/^\d{5}$/)
        .nullable(),
    })
    const cases: Record<string, z.ZodType> = {
      event: z.object({
        title: z.string().min(3).max(60),
        starts: z.iso.datetime(),
        day: z.iso.date(),
        at: z.iso.time(),
        organiser: z.email(),
        id: z.uuid(),
        link: z.url(),
        host: z.ipv4(),
        attendees: z.array(z.object({ name: z.string(), age: z.number().int().min(18).max(120) })).min(2),
        kind: z.enum(['meeting', 'call']),
        fee: z.number().positive().multipleOf(0.5).nullable(),
        address: Address,
        tags: z.array(z.string()).length(2),
        pair: z.tuple([z.string(), z.number()]),
        confirmed: z.boolean(),
        status: z.literal('draft'),
        either: z.union([z.string(), z.number()]),
        meta: z.record(z.string(), z.string()),
      }),
      product: z.object({
        product_name: z.string(),
        features: z.array(z.string()),
        colors: z.array(z.string()),
        pricing: z.object({ regular_price: z.number(), sale_price: z.number(), currency: z.string() }),
      }),
    }
    for (const [name, schema] of Object.entries(cases)) {
      const json = z.toJSONSchema(schema, { target: 'draft-7' }) as Record<string, unknown>
      const value = check(t, json, name)
      const parsed = schema.safeParse(value)
      t.ok(parsed.success, `${name}: zod accepts it ${parsed.success ? '' : JSON.stringify(parsed.error.issues)}`)
    }
  },
)

t.test('numbers: any satisfiable bounds and step get a value inside them', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: -1_000_000, max: 1_000_000 }),
      fc.integer({ min: 0, max: 1000 }),
      fc.integer({ min: 1, max: 50 }),
      fc.boolean(),
      (low, width, step, integer) => {
        // Bounds wide enough to hold a multiple of the step.
        const schema = {
          type: integer ? 'integer' : 'number',
          minimum: low,
          maximum: low + width + step,
          multipleOf: step,
        }
        const value = valueFor(schema)
        return typeof value === 'number' && value >= low && value <= low + width + step && value % step === 0
      },
    ),
    { numRuns: 500 },
  )
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 300 }), (min, extra) => {
      const value = valueFor({ type: 'string', minLength: min, maxLength: min + extra })
      return typeof value === 'string' && value.length >= min && value.length <= min + extra
    }),
    { numRuns: 300 },
  )
  t.pass('500 bounds and 300 lengths held')
})

t.test('a hostile schema costs bounded time and never throws', async (t) => {
  let nestedAllOf: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < 5000; i++) nestedAllOf = { allOf: [nestedAllOf] }
  let nestedArrays: Record<string, unknown> = { type: 'string', minLength: 1024 }
  for (let i = 0; i < 6; i++) nestedArrays = { type: 'array', items: nestedArrays, minItems: 64 }
  const wide = {
    type: 'object',
    properties: Object.fromEntries(
      Array.from({ length: 500 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^(x+x+)+y$', minLength: 40 }]),
    ),
  }
  const hostile: Record<string, unknown> = {
    'catastrophic pattern': { type: 'string', pattern: '^(x+x+)+y$', minLength: 40 },
    'many catastrophic patterns': wide,
    'allOf nested 5,000 deep': nestedAllOf,
    'anyOf that is itself': { anyOf: [{ $ref: '#' }] },
    'a reference cycle': { $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' },
    'required recursion with no way out': { type: 'object', properties: { next: { $ref: '#' } }, required: ['next'] },
    'arrays of 64 nested six deep': nestedArrays,
    'an invalid pattern': { type: 'string', pattern: '(' },
  }
  for (const [name, schema] of Object.entries(hostile)) {
    const started = performance.now()
    const value = valueFor(schema)
    const ms = performance.now() - started
    t.ok(JSON.stringify(value).length <= 40_000, `${name}: the value stays small`)
    // The pattern budget is 100 ms a value; the rest is bounded by steps and characters.
    t.ok(ms < 2000, `${name}: ${ms.toFixed(0)} ms`)
  }
})
