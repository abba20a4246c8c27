// The docs check, running half: every ```sh / ```bash / ```console block of README.md,
// docs/*.md, CHANGELOG.md and bench/README.md runs, as written, against a gateway started on
// the embedded defaults (a temporary data directory, the admin token it makes on its first
// start, as `npm start` does), and exits 0. Each block runs in its own `bash -e -o pipefail`
// from the repository's root, so every command of it must succeed, with a 60 s timeout.
// Every ```js block runs too, as an .mjs file on this Node with the openai SDK of
// node_modules (`node hello.mjs`, as the README says).
//
// What the check provides, as the pages document it:
// - the variables the pages use: TOLLGATE_KEY (a Standard1000 key), TOLLGATE_ADMIN_TOKEN (the
//   stored token), TOLLGATE_URL, TOLLGATE_DATA_DIR, ACCESS_TOKEN and REFRESH_TOKEN (a RAG
//   account's login, a fresh one per block: a block may log out), STORE (a vector store of TOLLGATE_KEY's), ALICE_PASSWORD, NEW_PASSWORD;
// - substitutions in the text: http://127.0.0.1:8080 and localhost:8080 become the gateway's
//   address; `key_…` a key made for that block; `qreq_…` a stored request made for that
//   block, still waiting in line (its key, the block's TOLLGATE_KEY, allows 1 request a
//   minute and has spent it), so it can be shown and cancelled; `@report.pdf` a small file in
//   a temporary directory; in the RAG walk, `file_…`, `mock://…` and `sess_…` a file uploaded
//   and a chat session made, for ACCESS_TOKEN's user, the way the walk's own first steps do;
// - `npx tollgate` runs bin/tollgate, the file npx resolves it to, without npm's two seconds
//   of start-up per call.
// A block that cannot run here (docker, a server in the foreground, the whole suite) is
// marked `<!-- docs-check: skip (why) -->` before its fence; code-blocks.test.ts lists the
// skips and keeps them few. The RAG gateway's page runs in commands-rag.test.ts, beside this
// one, so that each file stays well inside the runner's time limit.
import t from 'tap'
import { docFiles } from './markdown.ts'
import { runBlocks } from './run-blocks.ts'

// Its own file: commands-rag.test.ts.
await runBlocks(
  t,
  docFiles().filter((f) => f !== 'docs/rag-gateway.md'),
)
