// A request body per text-bearing field of the guardrails' table (src/guardrails/text-fields.ts):
// `text` stands in the field at `path` (a TEXT_FIELDS path, items written `[]`), the rest of
// the body is the least its endpoint accepts. The gateway test and the guardrails fuzz part
// both plant matches with these.

export interface FieldBody {
  readonly path: string
  /** Under /v2 (or /queue): chat/completions, completions, embeddings, responses. */
  readonly route: string
  body(text: string): Record<string, unknown>
}

export interface Models {
  readonly chat: string
  readonly embedding: string
}

/** A chat body whose turns end with a user's 'hi' (an assistant turn sent back first). */
const chatThen = (model: string, ...turns: unknown[]): Record<string, unknown> => ({
  model,
  messages: [...turns, { role: 'user', content: 'hi' }],
})

/** A Responses body of a tool call item sent back and its output. */
const toolRound = (model: string, call: Record<string, unknown>, output: unknown): Record<string, unknown> => ({
  model,
  input: [
    { call_id: 'c', name: 'f', ...call },
    { type: `${String(call.type)}_output`, call_id: 'c', output },
  ],
})

export function fieldBodies({ chat, embedding }: Models): FieldBody[] {
  return [
    {
      path: '.messages[].content',
      route: 'chat/completions',
      body: (x) => ({ model: chat, messages: [{ role: 'user', content: x }] }),
    },
    {
      path: '.messages[].content[].text',
      route: 'chat/completions',
      body: (x) => ({ model: chat, messages: [{ role: 'user', content: [{ type: 'text', text: x }] }] }),
    },
    {
      path: '.messages[].content[].refusal',
      route: 'chat/completions',
      body: (x) => chatThen(chat, { role: 'assistant', content: [{ type: 'refusal', refusal: x }] }),
    },
    {
      path: '.messages[].refusal',
      route: 'chat/completions',
      body: (x) => chatThen(chat, { role: 'assistant', content: null, refusal: x }),
    },
    {
      path: '.messages[].tool_calls[].function.arguments',
      route: 'chat/completions',
      body: (x) => ({
        model: chat,
        messages: [
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: JSON.stringify({ x }) } }],
          },
          { role: 'tool', tool_call_id: 'c', content: 'ok' },
        ],
      }),
    },
    {
      path: '.messages[].function_call.arguments',
      route: 'chat/completions',
      body: (x) => ({
        model: chat,
        messages: [
          { role: 'assistant', content: null, function_call: { name: 'f', arguments: JSON.stringify({ x }) } },
          { role: 'function', name: 'f', content: 'ok' },
        ],
      }),
    },
    {
      path: '.prediction.content',
      route: 'chat/completions',
      body: (x) => ({ ...chatThen(chat), prediction: { type: 'content', content: x } }),
    },
    {
      path: '.prediction.content[].text',
      route: 'chat/completions',
      body: (x) => ({ ...chatThen(chat), prediction: { type: 'content', content: [{ type: 'text', text: x }] } }),
    },
    { path: '.prompt', route: 'completions', body: (x) => ({ model: chat, prompt: x }) },
    { path: '.prompt[]', route: 'completions', body: (x) => ({ model: chat, prompt: ['fine', x] }) },
    { path: '.suffix', route: 'completions', body: (x) => ({ model: chat, prompt: 'a', suffix: x }) },
    { path: '.input', route: 'embeddings', body: (x) => ({ model: embedding, input: x }) },
    { path: '.input[]', route: 'embeddings', body: (x) => ({ model: embedding, input: ['fine', x] }) },
    { path: '.instructions', route: 'responses', body: (x) => ({ model: chat, instructions: x, input: 'hi' }) },
    {
      path: '.input[].content',
      route: 'responses',
      body: (x) => ({ model: chat, input: [{ role: 'user', content: x }] }),
    },
    {
      path: '.input[].content[].text',
      route: 'responses',
      body: (x) => ({ model: chat, input: [{ role: 'user', content: [{ type: 'input_text', text: x }] }] }),
    },
    {
      path: '.input[].arguments',
      route: 'responses',
      body: (x) => toolRound(chat, { type: 'function_call', arguments: JSON.stringify({ x }) }, 'ok'),
    },
    {
      path: '.input[].input',
      route: 'responses',
      body: (x) => toolRound(chat, { type: 'custom_tool_call', input: x }, 'ok'),
    },
    {
      path: '.input[].output',
      route: 'responses',
      body: (x) => toolRound(chat, { type: 'function_call', arguments: '{}' }, x),
    },
    {
      path: '.input[].output[].text',
      route: 'responses',
      body: (x) => toolRound(chat, { type: 'function_call', arguments: '{}' }, [{ type: 'input_text', text: x }]),
    },
  ]
}
