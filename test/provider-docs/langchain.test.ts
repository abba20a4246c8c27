// The provider's LangChain page (telekom/aifoundation-docs, src/content/docs/v1/
// integrations/langchain.mdx), against the gateway `npm start` runs. LangChain is not a
// dependency here, so each example is the openai SDK call its langchain_openai class makes:
// ChatOpenAI(streaming=True).stream(text) sends one user message with stream: true (and,
// with a base URL other than OpenAI's, no stream_options); the page's AIFSEmbeddings
// subclass calls client.embeddings.create(input=texts, model=...) itself, the SDK asking for
// base64 and decoding it, as the Python SDK does. `pip install` is no API call.
import OpenAI from 'openai'
import t from 'tap'
import { startDocsGateway } from './docs-gateway.ts'

await startDocsGateway()
// openai_api_key=os.getenv("OPENAI_API_KEY"), openai_api_base=os.getenv("OPENAI_BASE_URL")
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, baseURL: process.env.OPENAI_BASE_URL })

t.test(
  'langchain.mdx, Initialize LLM: ChatOpenAI(streaming=True), llm.stream(prompt), print each chunk.content',
  async (t) => {
    const stream = await client.chat.completions.create({
      model: 'Llama-3.3-70B-Instruct',
      messages: [{ role: 'user', content: 'Write me a short poem about cloud computing.' }],
      stream: true,
    })
    const printed: string[] = []
    for await (const chunk of stream) {
      const content = chunk.choices[0]?.delta.content
      if (content) printed.push(content)
    }
    t.ok(printed.length > 1, `${printed.length} chunks with content`)
  },
)

/** The page's AIFSEmbeddings: embed_documents, embed_query and their async twins, over the SDK. */
const embedModel = {
  model: 'text-embedding-bge-m3',
  async embedDocuments(texts: string[]): Promise<number[][]> {
    const embeddings = await client.embeddings.create({ input: texts, model: this.model })
    return embeddings.data.map((embed) => embed.embedding)
  },
  async embedQuery(text: string): Promise<number[]> {
    return (await this.embedDocuments([text]))[0] ?? []
  },
}

t.test('langchain.mdx, Initialize Embeddings: AIFSEmbeddings.embed_documents and embed_query', async (t) => {
  const embeddings = await embedModel.embedDocuments(['Hello!', 'World!'])
  t.equal(embeddings.length, 2)
  t.equal(embeddings[0]?.length, 1024, 'Dimensions: 1024')
  const query = await embedModel.embedQuery('Hello!')
  t.same(query, embeddings[0], 'a query is embedded as a document of one text')
})
