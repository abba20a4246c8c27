// The examples of the provider's documentation (telekom/aifoundation-docs, src/content/docs/
// v1/) that this folder does not run, and why; and a check that INDEX.md, the list of every
// example of every page with the file that runs it, names every page, every test file of
// this folder and every one of these exceptions. Everything else a gateway can serve is run
// by the files INDEX.md names.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'

const HERE = import.meta.dirname
const INDEX = readFileSync(join(HERE, 'INDEX.md'), 'utf8')

/** Examples not run, each with the page, the example and the reason. */
export const EXCEPTIONS: ReadonlyArray<{ readonly page: string; readonly example: string; readonly reason: string }> = [
  {
    page: 'getting-started/quickstart.mdx',
    example: 'Step 3: Windows (PowerShell) and Windows (CMD) tabs',
    reason:
      'OS-specific shell setup: they set the same two variables as the macOS / Linux tab, which is run (the SDK reading them from the environment)',
  },
  {
    page: 'getting-started/authentication.mdx',
    example: 'Set Up Environment Variables: Windows (PowerShell) and Windows (CMD) tabs',
    reason: 'OS-specific shell setup, as on the quickstart',
  },
  {
    page: 'getting-started/quickstart.mdx',
    example: 'Step 2: purchase via the T-Cloud Marketplace',
    reason: "a marketplace purchase; keys come from the admin API (POST /admin/keys) in place of the provider's portal",
  },
  {
    page: 'getting-started/authentication.mdx',
    example: 'Production Key: purchase via the T-Cloud Marketplace',
    reason: 'a marketplace purchase',
  },
  {
    page: 'faq.mdx',
    example: 'How do I order LLM-Serving? (the Basic tariff on the T-Cloud Marketplace)',
    reason: 'a marketplace purchase',
  },
  {
    page: 'smartchat/local-chat.mdx',
    example: "3. Upload Files: the multipart upload sent with the headers dict's Content-Type: application/json",
    reason:
      'the guide labels a multipart/form-data body as JSON (requests keeps a Content-Type the caller set); the issue excepts it. smartchat.test.ts still sends it as requests does',
  },
]

/** Every page of the v1 documentation. */
const PAGES = [
  'index.mdx',
  'faq.mdx',
  'getting-started/quickstart.mdx',
  'getting-started/authentication.mdx',
  'getting-started/models.mdx',
  'guides/chat-completions.mdx',
  'guides/streaming.mdx',
  'guides/function-calling.mdx',
  'guides/embeddings.mdx',
  'guides/audio.mdx',
  'guides/image-generation.mdx',
  'guides/multimodal.mdx',
  'guides/reasoning.mdx',
  'guides/fine-tuning.mdx',
  'guides/asynchronous-requests.mdx',
  'guides/visual-rag.mdx',
  'integrations/langchain.mdx',
  'integrations/llama-index.mdx',
  'reference/api-endpoints.mdx',
  'reference/error-codes.mdx',
  'reference/rate-limits.mdx',
  'plans/index.mdx',
  'plans/basic.mdx',
  'plans/standard-1000.mdx',
  'plans/standard-2000.mdx',
  'plans/standard-3000.mdx',
  'plans/standard-4000.mdx',
  'smartchat/overview.mdx',
  'smartchat/api-reference.mdx',
  'smartchat/local-chat.mdx',
  'smartchat/global-chat.mdx',
]

t.test('INDEX.md names every page of the v1 documentation', async (t) => {
  for (const page of PAGES) t.ok(INDEX.includes(`\`${page}\``), page)
})

t.test('INDEX.md names every test file of this folder', async (t) => {
  const files = readdirSync(HERE).filter((f) => f.endsWith('.test.ts'))
  t.ok(files.length >= 15)
  for (const file of files) t.ok(INDEX.includes(file), file)
})

t.test('INDEX.md lists every exception with its reason', async (t) => {
  const section = INDEX.slice(INDEX.indexOf('## Not run'))
  t.ok(section.length > 0, 'a "## Not run" section')
  for (const { page, example, reason } of EXCEPTIONS) {
    t.ok(section.includes(page) && section.includes(example) && section.includes(reason), `${page}: ${example}`)
  }
})
