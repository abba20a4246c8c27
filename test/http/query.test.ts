// Strict query strings (src/http/query.ts), alone: what the admin lists and the queue's
// stored requests refuse, and that a client's odd parameter name is never echoed back.
import t from 'tap'
import { z } from 'zod'
import { GatewayError } from '../../src/errors.ts'
import { parseQuery, printable } from '../../src/http/query.ts'

const schema = z.strictObject({
  owner: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(100).optional(),
})
const query = (text: string): URLSearchParams => new URLSearchParams(text)

function refusal(text: string): GatewayError {
  try {
    parseQuery(schema, query(text))
  } catch (error) {
    if (error instanceof GatewayError) return error
    throw error
  }
  throw new Error(`?${text} was accepted`)
}

t.test('what the schema names is read and typed', async (t) => {
  t.same(parseQuery(schema, query('owner=ann&limit=5')), { owner: 'ann', limit: 5 })
  t.same(parseQuery(schema, query('')), {})
})

t.test('a typo is a 400, not a filter silently dropped', async (t) => {
  const error = refusal('ownr=ann')
  t.equal(error.status, 400)
  t.equal(error.errorName, 'invalid_body')
  t.equal(error.message, 'Unknown query parameter(s): ownr.')
})

t.test('a parameter given twice is refused, naming it', async (t) => {
  const error = refusal('owner=a&owner=b')
  t.equal(error.message, 'Query parameter owner is given more than once.')
  t.equal(error.param, 'owner')
})

t.test('a value the schema refuses names the parameter', async (t) => {
  const error = refusal('limit=500')
  t.equal(error.param, 'limit')
  t.match(error.message, /^Invalid query parameter limit: /)
})

t.test('names that are not plain are not echoed', async (t) => {
  t.equal(printable('owner'), 'owner')
  t.equal(printable('<script>'), '(unprintable)')
  t.equal(printable('x'.repeat(65)), '(unprintable)')
  t.equal(refusal('%3Cb%3E=1').message, 'Unknown query parameter(s): (unprintable).')
  t.equal(refusal('%3Cb%3E=1&%3Cb%3E=2').param, '(unprintable)')
})
