// A value that satisfies a JSON Schema, made from the schema alone: the mock's tool-call
// arguments and structured-output replies. The same schema always gets the same value,
// so a test can write down what it expects.
//
// It covers what function parameters and response formats use in practice (and what the
// openai SDK's zod helpers emit): types and type lists, const and enum, required and
// optional properties, additionalProperties, nested objects and arrays (items,
// prefixItems, draft-07 tuple items), min/max lengths, items and properties, numeric
// bounds (inclusive and exclusive) and multipleOf, anyOf/oneOf (first fitting branch),
// allOf (merged), $ref into the same document (recursion ends at a depth where optional
// parts are left out and a nullable branch is taken), and simple string formats.
// A `pattern` is honoured when one of the candidate strings matches it (the formats'
// own patterns, as zod emits them, do); an arbitrary pattern is not solved.
//
// The schema comes from the request, so the work is bounded whatever it says: recursion
// by depth and steps, the value by a budget of characters (past it, what remains is
// null), and patterns by pattern-match.ts's time budget.
import { PatternBudget } from './pattern-match.ts'

type Schema = Readonly<Record<string, unknown>>

/** Past this depth optional properties are left out and nullable branches are preferred. */
const SOFT_DEPTH = 6
/** Past this depth (a recursion with no way out) the value is null. */
const HARD_DEPTH = 24
/** Schema steps (references followed, branches taken, values made) one value may take. */
const MAX_STEPS = 20_000
/** About how many characters of JSON one value may grow to; past it, what remains is null. */
const MAX_CHARS = 32_768
/** The most items an array gets, and properties an open object, whatever minItems says. */
const MAX_ITEMS = 64
/** The longest string made, whatever minLength says. */
const MAX_STRING = 1024

interface Place {
  /** The property name the value is for, if any: strings are made from it. */
  readonly key: string | undefined
  readonly depth: number
  /** Which item of an array (0 for anything else): items differ, for uniqueItems. */
  readonly variant: number
}

export function valueFor(schema: unknown): unknown {
  return new Generator(schema).value(schema, { key: undefined, depth: 0, variant: 0 })
}

class Generator {
  private readonly root: unknown
  private steps = 0
  private chars = 0
  private readonly patterns = new PatternBudget()

  constructor(root: unknown) {
    this.root = root
  }

  value(raw: unknown, place: Place): unknown {
    if (place.depth > HARD_DEPTH || !this.step() || this.chars > MAX_CHARS) return null
    // Every value costs something, so that a wide schema of empty values is bounded too.
    this.chars += 4
    if (raw === true || raw === undefined) return this.string({}, place)
    if (!isSchema(raw)) return null
    let schema = this.resolve(raw, 0)
    // anyOf/oneOf, perhaps nested (or referring back to itself): a branch at a time, a bounded number of times.
    for (let hops = 0; hops < HARD_DEPTH; hops++) {
      if ('const' in schema || (Array.isArray(schema.enum) && schema.enum.length > 0)) break
      const branches = Array.isArray(schema.anyOf)
        ? schema.anyOf
        : Array.isArray(schema.oneOf)
          ? schema.oneOf
          : undefined
      if (branches === undefined || branches.length === 0 || !this.step()) break
      const { anyOf: _a, oneOf: _o, ...rest } = schema
      const branch = this.pickBranch(branches, place.depth)
      schema = merge(rest, isSchema(branch) ? this.resolve(branch, 0) : {})
    }
    if ('const' in schema) return schema.const
    if (Array.isArray(schema.enum) && schema.enum.length > 0)
      return schema.enum[place.variant % schema.enum.length] as unknown
    switch (typeOf(schema, place.depth)) {
      case 'null':
        return null
      case 'boolean':
        return place.variant % 2 === 0
      case 'integer':
        return numberFor(schema, place, true)
      case 'number':
        return numberFor(schema, place, false)
      case 'array':
        return this.arrayFor(schema, place)
      case 'object':
        return this.objectFor(schema, place)
      default:
        return this.string(schema, place)
    }
  }

  private step(): boolean {
    this.steps += 1
    return this.steps <= MAX_STEPS
  }

  /** $ref and allOf folded into one schema; a reference that leads nowhere is `{}`. */
  private resolve(schema: Schema, nesting: number): Schema {
    let current = schema
    for (let hops = 0; hops < HARD_DEPTH && typeof current.$ref === 'string' && this.step(); hops++) {
      const { $ref, ...siblings } = current
      const target = pointer(this.root, $ref)
      current = merge(isSchema(target) ? target : {}, siblings)
    }
    if (Array.isArray(current.allOf) && nesting < HARD_DEPTH) {
      const { allOf, ...rest } = current
      let merged: Schema = rest
      for (const part of allOf as unknown[])
        if (isSchema(part) && this.step()) merged = merge(merged, this.resolve(part, nesting + 1))
      current = merged
    }
    return current
  }

  private string(schema: Schema, place: Place): string {
    const value = stringFor(schema, place, this.patterns)
    this.chars += value.length
    return value
  }

  /** The first branch that is not null; deep down, the null one if there is one (recursion ends there). */
  private pickBranch(branches: readonly unknown[], depth: number): unknown {
    const isNull = (b: unknown): boolean => isSchema(b) && b.type === 'null'
    if (depth >= SOFT_DEPTH) return branches.find(isNull) ?? branches[0]
    return branches.find((b) => !isNull(b)) ?? branches[0]
  }

  private arrayFor(schema: Schema, place: Place): unknown[] {
    const prefix = Array.isArray(schema.prefixItems)
      ? schema.prefixItems
      : Array.isArray(schema.items)
        ? schema.items
        : []
    const rest = Array.isArray(schema.items) ? schema.additionalItems : schema.items
    const min = count(schema.minItems) ?? 0
    const max = Math.min(count(schema.maxItems) ?? MAX_ITEMS, MAX_ITEMS)
    // One item shows the shape; none deep in a recursion, where an item would recurse again.
    const wanted = Math.max(min, prefix.length, place.depth < SOFT_DEPTH ? 1 : 0)
    const length = Math.min(wanted, max, rest === false ? prefix.length : MAX_ITEMS)
    const items: unknown[] = []
    for (let i = 0; i < length && this.chars <= MAX_CHARS; i++) {
      items.push(
        this.value(i < prefix.length ? prefix[i] : rest, {
          key: singular(place.key),
          depth: place.depth + 1,
          variant: i,
        }),
      )
    }
    return items
  }

  private objectFor(schema: Schema, place: Place): Record<string, unknown> {
    const properties = isSchema(schema.properties) ? schema.properties : {}
    const required = Array.isArray(schema.required)
      ? schema.required.filter((r): r is string => typeof r === 'string')
      : []
    const max = count(schema.maxProperties) ?? Infinity
    const keys = [...new Set(required)]
    if (place.depth < SOFT_DEPTH) {
      for (const key of Object.keys(properties)) if (keys.length < max && !keys.includes(key)) keys.push(key)
    }
    const extra = schema.additionalProperties
    const min = Math.min(count(schema.minProperties) ?? 0, MAX_ITEMS)
    for (let i = 1; keys.length < min && extra !== false && i <= MAX_ITEMS; i++) {
      if (!keys.includes(`key_${i}`)) keys.push(`key_${i}`)
    }
    const out: Record<string, unknown> = {}
    for (const key of keys) {
      const propertySchema = Object.hasOwn(properties, key)
        ? properties[key]
        : extra === false
          ? undefined
          : isSchema(extra)
            ? extra
            : undefined
      // Own property so that "__proto__" is a key like any other.
      Object.defineProperty(out, key, {
        value: this.value(propertySchema, { key, depth: place.depth + 1, variant: place.variant }),
        enumerable: true,
        writable: true,
        configurable: true,
      })
    }
    return out
  }
}

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** A non-negative integer keyword, else undefined. */
function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

/** Two schemas that must both hold, as one: later keywords win, properties and required add up. */
function merge(a: Schema, b: Schema): Schema {
  const out: Record<string, unknown> = { ...a, ...b }
  if (isSchema(a.properties) && isSchema(b.properties)) out.properties = { ...a.properties, ...b.properties }
  if (Array.isArray(a.required) && Array.isArray(b.required)) out.required = [...a.required, ...b.required]
  return out
}

/** A JSON pointer reference within the document ("#", "#/$defs/Name"); other documents are not fetched. */
function pointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined
  let node = root
  let path: string
  try {
    path = decodeURIComponent(ref.slice(1))
  } catch {
    return undefined
  }
  if (path === '') return node
  for (const raw of path.split('/').slice(1)) {
    const segment = raw.replaceAll('~1', '/').replaceAll('~0', '~')
    if (Array.isArray(node)) node = node[Number(segment)] as unknown
    else if (isSchema(node) && Object.hasOwn(node, segment)) node = node[segment]
    else return undefined
  }
  return node
}

/** The type to make: the declared one (the first that is not null, unless deep down), else guessed from the keywords. */
function typeOf(schema: Schema, depth: number): string {
  const declared = schema.type
  if (typeof declared === 'string') return declared
  if (Array.isArray(declared) && declared.length > 0) {
    const types = declared.filter((t): t is string => typeof t === 'string')
    if (depth >= SOFT_DEPTH && types.includes('null')) return 'null'
    return types.find((t) => t !== 'null') ?? 'null'
  }
  if ('properties' in schema || 'required' in schema || 'additionalProperties' in schema) return 'object'
  if ('items' in schema || 'prefixItems' in schema || 'minItems' in schema) return 'array'
  if ('minimum' in schema || 'maximum' in schema || 'multipleOf' in schema) return 'number'
  return 'string'
}

/** The first of a few candidates that fits the bounds, else the nearest multiple inside them. */
function numberFor(schema: Schema, place: Place, integer: boolean): number {
  const minimum = finite(schema.minimum)
  const maximum = finite(schema.maximum)
  // Draft-04 wrote exclusive bounds as booleans beside minimum/maximum; later drafts as numbers.
  const exclusiveMin = schema.exclusiveMinimum === true ? minimum : finite(schema.exclusiveMinimum)
  const exclusiveMax = schema.exclusiveMaximum === true ? maximum : finite(schema.exclusiveMaximum)
  const step = finite(schema.multipleOf)
  const fits = (v: number): boolean =>
    Number.isFinite(v) &&
    (!integer || Number.isInteger(v)) &&
    (minimum === undefined || schema.exclusiveMinimum === true || v >= minimum) &&
    (maximum === undefined || schema.exclusiveMaximum === true || v <= maximum) &&
    (exclusiveMin === undefined || v > exclusiveMin) &&
    (exclusiveMax === undefined || v < exclusiveMax) &&
    (step === undefined || step <= 0 || Number.isInteger(v / step))
  const low = Math.max(minimum ?? -Infinity, exclusiveMin ?? -Infinity)
  const high = Math.min(maximum ?? Infinity, exclusiveMax ?? Infinity)
  const base = (integer ? 1 : 1.5) + place.variant
  const candidates = [
    base,
    0,
    low,
    high,
    integer ? Math.ceil(low) : low,
    integer ? Math.floor(high) : high,
    low + 1,
    high - 1,
    (low + high) / 2,
    integer ? Math.round((low + high) / 2) : (low + high) / 2,
  ]
  if (step !== undefined && step > 0) {
    const from = Number.isFinite(low) ? Math.ceil(low / step) : Number.isFinite(high) ? Math.floor(high / step) : 1
    for (let k = from; k <= from + 2; k++) candidates.push(k * step, (from - (k - from)) * step)
  }
  return candidates.find(fits) ?? (Number.isFinite(low) ? low : Number.isFinite(high) ? high : 0)
}

/** Values for the common formats, each one matching the pattern zod emits for that format. */
const FORMATS: Readonly<Record<string, readonly string[]>> = {
  'date-time': ['2025-01-01T12:00:00Z', '2025-01-01T12:00:00.000Z', '2025-01-01T12:00:00+00:00'],
  date: ['2025-01-01'],
  time: ['12:00:00Z', '12:00:00', '12:00:00+00:00'],
  duration: ['P1D', 'PT1H'],
  email: ['mock@example.com'],
  'idn-email': ['mock@example.com'],
  hostname: ['example.com'],
  'idn-hostname': ['example.com'],
  ipv4: ['192.0.2.1'],
  ipv6: ['2001:db8::1'],
  uri: ['https://example.com/'],
  'uri-reference': ['https://example.com/'],
  iri: ['https://example.com/'],
  url: ['https://example.com/'],
  uuid: ['3f2b8c1e-7d4a-4b6f-9c2e-1a5d8e7f6b3c'],
  regex: ['^mock$'],
}

function stringFor(schema: Schema, place: Place, patterns: PatternBudget): string {
  const format = typeof schema.format === 'string' ? (FORMATS[schema.format] ?? []) : []
  const name = place.key === undefined ? 'sample' : `sample ${place.key.replace(/[_-]+/g, ' ').trim() || 'value'}`
  const own = place.variant === 0 ? name : `${name} ${place.variant + 1}`
  const min = Math.min(count(schema.minLength) ?? 0, MAX_STRING)
  const max = Math.min(count(schema.maxLength) ?? MAX_STRING, MAX_STRING)
  const fit = (s: string): string => (s.length < min ? s + 'x'.repeat(min - s.length) : s).slice(0, max)
  const pattern = typeof schema.pattern === 'string' ? schema.pattern : undefined
  // A pattern without a format is often a format's pattern (zod's iso.time has no
  // format keyword): every format's values are tried before the plain ones.
  const others = pattern === undefined ? [] : Object.values(FORMATS).flat()
  const candidates = [
    ...format,
    own,
    ...others,
    'sample',
    'mock',
    'a',
    'A',
    '0',
    'a1',
    'A1',
    'ABC',
    'abc',
    '12345',
    'x',
  ].map(fit)
  const index = pattern === undefined ? 0 : (patterns.firstMatch(pattern, candidates) ?? 0)
  return candidates[index < 0 ? 0 : index] ?? ''
}

/** "tags" → "tag", so the items of an array read as items. */
function singular(key: string | undefined): string | undefined {
  return key !== undefined && key.length > 3 && key.endsWith('s') ? key.slice(0, -1) : key
}
