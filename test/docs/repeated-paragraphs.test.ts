// No page says the same paragraph twice (docs/operating.md listed its metrics twice, the
// second copy drifting from the first): a repeat is one to merge, not two to keep in step.
import { readFileSync, readdirSync } from 'node:fs'
import t from 'tap'

const pages = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
]

/** A page's paragraphs outside code blocks, of a sentence or more. */
function paragraphsOf(text: string): string[] {
  return text
    .replace(/^```[\s\S]*?^```/gm, '')
    .split(/\n\s*\n/)
    .map((p) => p.replace(/\s+/g, ' ').trim())
    .filter((p) => p.length >= 120 && !p.startsWith('|'))
}

t.test('no paragraph is said twice on one page', async (t) => {
  for (const page of pages) {
    const paragraphs = paragraphsOf(readFileSync(page, 'utf8'))
    // A paragraph whose opening is said again, in another paragraph or inside one (a drifted
    // copy keeps its opening words).
    const repeated = paragraphs
      .map((p, i) => ({ start: p.slice(0, 80), i }))
      .filter(({ start, i }) => paragraphs.some((q, j) => j !== i && q.includes(start)))
      .map(({ start }) => start)
    t.same(repeated, [], `${page}: no repeated paragraph`)
  }
})
