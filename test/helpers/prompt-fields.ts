// Realistic payloads for the fields besides the messages that carry prompt text: tool
// definitions with English descriptions, a structured-output schema, a prediction of code,
// metadata at OpenAI's limits. Shared by the estimate's unit tests and the attacker tests.

/** `count` chat-completions tools, each a function with a described JSON schema (about 500 bytes each). */
export function functionTools(count: number): Array<{ type: 'function'; function: Record<string, unknown> }> {
  return Array.from({ length: count }, (_, i) => ({
    type: 'function' as const,
    function: {
      name: `lookup_order_status_${i}`,
      description: `Look up the status of a customer's order (variant ${i}). Returns where the parcel is, the courier and the expected delivery date.`,
      parameters: {
        type: 'object',
        properties: {
          order_id: { type: 'string', description: 'The order number, e.g. A-1234, as printed on the receipt' },
          carrier: { type: 'string', enum: ['ups', 'dhl', 'fedex', 'post'] },
          days: { type: 'integer', minimum: 1, maximum: 30, description: 'How many days of history to return' },
        },
        required: ['order_id'],
        additionalProperties: false,
      },
      strict: true,
    },
  }))
}

/** The same tools in the Responses API's flat shape. */
export function responsesTools(count: number): Array<Record<string, unknown>> {
  return functionTools(count).map((tool) => ({ type: 'function', ...tool.function }))
}

/** A chat-completions `response_format` with a JSON schema. */
export function jsonSchemaFormat(properties = 12): { type: 'json_schema'; json_schema: Record<string, unknown> } {
  const fields = Object.fromEntries(
    Array.from({ length: properties }, (_, i) => [
      `field_${i}`,
      { type: 'string', description: `The ${i}th thing the answer must say, in one short sentence of plain English.` },
    ]),
  )
  return {
    type: 'json_schema',
    json_schema: {
      name: 'answer',
      strict: true,
      schema: { type: 'object', properties: fields, required: Object.keys(fields), additionalProperties: false },
    },
  }
}

/** A predicted output of about `bytes` of code. */
export function predictionOf(bytes: number): { type: 'content'; content: string } {
  const line =
    'export function total(items) {\n  return items.reduce((sum, item) => sum + item.price * item.quantity, 0)\n}\n'
  return { type: 'content', content: line.repeat(Math.ceil(bytes / line.length)) }
}

/** Metadata at OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512. */
export function metadataOf(): Record<string, string> {
  return Object.fromEntries(
    Array.from({ length: 16 }, (_, i) => [
      `note_${i}`,
      `Customer ${i} asked about a delayed parcel and wants a call back in the morning. `.repeat(6).slice(0, 512),
    ]),
  )
}
