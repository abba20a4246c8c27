// The tenant check's walk of a request body (src/inference/object-ids.ts, issue 19): every
// JSON body is walked for ids of stored objects before it goes upstream. Measured in
// process on bodies of the shapes the gateway sees, each as a ratio to JSON.parse of the
// same body in the same run (the work the gateway already does on it), so the figure holds
// on a shared machine where absolute times drift.
//
//   npm run bench -- body-ids
import { idsInBody } from '../src/inference/object-ids.ts'
import { fmt } from './proxy-rig.ts'

interface Shape {
  readonly name: string
  readonly body: Record<string, unknown>
}

const parts = (n: number): unknown[] =>
  Array.from({ length: n }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: [{ type: 'text', text: `${'lorem ipsum dolor sit amet '.repeat(6)}${i}` }],
  }))
const tool = (i: number): unknown => ({
  type: 'function',
  function: {
    name: `tool_${i}`,
    description: 'Looks a thing up. '.repeat(4),
    parameters: { type: 'object', properties: { file_id: { type: 'string' }, q: { type: 'string' } }, required: ['q'] },
  },
})

const SHAPES: readonly Shape[] = [
  {
    name: 'small chat (2 messages)',
    body: {
      model: 'm',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hello there.' },
      ],
      max_tokens: 16,
    },
  },
  {
    name: 'chat with 10 tools',
    body: { model: 'm', messages: parts(4), tools: Array.from({ length: 10 }, (_, i) => tool(i)) },
  },
  {
    name: 'responses naming 3 objects',
    body: {
      model: 'm',
      previous_response_id: 'resp_1',
      input: [
        { type: 'item_reference', id: 'msg_1' },
        { role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] },
      ],
      tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }],
    },
  },
  { name: '4 MB: 20,000 content parts', body: { model: 'm', messages: parts(20_000) } },
]

/** Median of `rounds` timings of `runs` calls, in microseconds per call. */
function time(fn: () => void, runs: number, rounds = 5): number {
  const samples: number[] = []
  for (let r = 0; r < rounds; r++) {
    const start = performance.now()
    for (let i = 0; i < runs; i++) fn()
    samples.push(((performance.now() - start) * 1000) / runs)
  }
  return samples.sort((a, b) => a - b)[Math.floor(rounds / 2)] ?? 0
}

export async function benchBodyIds(): Promise<string> {
  const rows: string[] = []
  for (const { name, body } of SHAPES) {
    const text = JSON.stringify(body)
    const runs = Math.max(5, Math.round(2_000_000 / text.length))
    // Warm both paths before timing either.
    for (let i = 0; i < Math.min(runs, 1000); i++) idsInBody(JSON.parse(text) as Record<string, unknown>)
    const parsed = JSON.parse(text) as Record<string, unknown>
    const parse = time(() => JSON.parse(text), runs)
    const walk = time(() => idsInBody(parsed), runs)
    rows.push(
      `| ${name} | ${fmt(text.length)} | ${parse.toFixed(parse < 10 ? 2 : 0)} | ${walk.toFixed(walk < 10 ? 2 : 0)} | ${(walk / parse).toFixed(2)} |`,
    )
  }
  return [
    '## Tenant check: walking a body for object ids (bench/body-ids.ts)',
    '',
    'In process, no HTTP: each body parsed and walked many times, the median of five rounds. The',
    'walk runs once per JSON request, after the body is parsed; "ratio" is walk ÷ JSON.parse of',
    'the same body in the same run.',
    '',
    '| Body | Bytes | JSON.parse µs | walk µs | ratio |',
    '|---|---|---|---|---|',
    ...rows,
  ].join('\n')
}

if (import.meta.main) process.stdout.write(`${await benchBodyIds()}\n`)
