// The docs check's running half for the RAG gateway's page (accounts, logins, the SmartChat
// walk): the same run as commands.test.ts, against a gateway of its own.
import t from 'tap'
import { runBlocks } from './run-blocks.ts'

await runBlocks(t, ['docs/rag-gateway.md'])
