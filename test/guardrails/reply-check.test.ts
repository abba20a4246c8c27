// The stream window alone (reply-check.ts): however a reply is cut into events, no byte of a
// blocked match is let out, what is let out is the stream's own text in order, and a clean
// stream comes out whole; text is held back by at most the window.
import fc from 'fast-check'
import t from 'tap'
import { DETECTORS } from '../../src/guardrails/detectors.ts'
import type { Rule } from '../../src/guardrails/policy.ts'
import { HOLD_CHARS, replyWindow, type ReplyFinding } from '../../src/guardrails/reply-check.ts'

const rules: Rule[] = [
  { detector: DETECTORS.get('card')!, action: 'block' },
  { detector: DETECTORS.get('private_key')!, action: 'block' },
  { detector: DETECTORS.get('email')!, action: 'flag' },
]
const SECRETS = ['4111 1111 1111 1111', '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt']

/** `text` cut at `cuts`, through a window: what went out, and the block if any. */
function run(text: string, cuts: number[]): { out: string; blocked?: ReplyFinding; flags: number; maxHeld: number } {
  let flags = 0
  const window = replyWindow(rules, () => flags++)
  const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b)
  let out = ''
  let from = 0
  let maxHeld = 0
  let biggest = 0
  for (const to of [...points, text.length]) {
    const piece = text.slice(from, to)
    biggest = Math.max(biggest, piece.length)
    from = to
    const got = window.push(piece, piece)
    if (typeof got !== 'string') return { out, blocked: got, flags, maxHeld }
    out += got
    // Held: the window, and at most one event that straddles its edge.
    maxHeld = Math.max(maxHeld, to - out.length - biggest)
  }
  const rest = window.end()
  if (typeof rest !== 'string') return { out, blocked: rest, flags, maxHeld }
  return { out: out + rest, flags, maxHeld }
}

const words = fc
  .array(fc.constantFrom('the', 'order', 'is', 'ready', 'Kunde', '42', 'x', '\n', 'über'), { maxLength: 120 })
  .map((w) => w.join(' '))

t.test('a blocked match never leaves, however the stream is cut', async (t) => {
  fc.assert(
    fc.property(
      words,
      fc.constantFrom(...SECRETS),
      words,
      fc.array(fc.nat(), { maxLength: 40 }),
      (a, secret, b, cuts) => {
        const text = `${a} ${secret} ${b}`
        const r = run(text, cuts)
        if (r.blocked === undefined) return false
        if (r.out.includes(secret.slice(0, 4))) return false
        if (!text.startsWith(r.out)) return false
        return r.blocked.sentChars === r.out.length
      },
    ),
    { numRuns: 500, seed: 43 },
  )
  t.pass('500 streams')
})

t.test('a clean stream comes out whole, held back by at most the window', async (t) => {
  fc.assert(
    fc.property(words, fc.array(fc.nat(), { maxLength: 40 }), (text, cuts) => {
      const r = run(text, cuts)
      return r.blocked === undefined && r.out === text && r.maxHeld <= HOLD_CHARS
    }),
    { numRuns: 500, seed: 44 },
  )
  t.pass('500 streams')
})

t.test('a flag is told once, however often the window sees it', async (t) => {
  const text = `write to anna@example.com ${'and more words '.repeat(40)}`
  const r = run(
    text,
    Array.from({ length: 60 }, (_, i) => i * 7),
  )
  t.equal(r.blocked, undefined)
  t.equal(r.out, text)
  t.equal(r.flags, 1)
})
