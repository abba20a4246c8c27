// The fuzz run, in parts: which targets each attacks and how its cases are mixed. CI runs
// each part as a test file (test/fuzz/<name>.test.ts) with `cases` cases, about 20,000 in all;
// `npm run bench -- fuzz` runs every part ten times as long. A new endpoint family joins
// by listing its targets (targets.ts) in a part, or in a part of its own.
import { ANTHROPIC_TARGETS } from './anthropic-targets.ts'
import type { Mix } from './requests.ts'
import {
  ADMIN_TARGETS,
  FOREIGN_ID_TARGETS,
  PORTAL_TARGETS,
  PROBE_TARGETS,
  QUEUE_TARGETS,
  RAG_AUTH_TARGETS,
  RAG_TARGETS,
  V1_TARGETS,
  V2_TARGETS,
  type FuzzTarget,
} from './targets.ts'

export interface FuzzPart {
  readonly name: string
  readonly what: string
  readonly targets: readonly FuzzTarget[]
  readonly mix: Mix
  /** Cases in CI. */
  readonly cases: number
  /** Run with every model on the recording upstream (see FuzzGatewayOptions). */
  readonly everythingUpstream?: boolean
}

export const FUZZ_PARTS: readonly FuzzPart[] = [
  {
    name: 'v2-json',
    what: '/v2 with JSON bodies',
    targets: [...V2_TARGETS.filter((target) => target.body !== 'multipart'), ...PROBE_TARGETS],
    mix: { framing: 0.03, headers: 0.03, url: 0.05, method: 0.03, version: 0.02, auth: 0.08, pipeline: 0.03 },
    cases: 3500,
  },
  {
    name: 'v2-multipart',
    what: '/v2 multipart uploads',
    targets: V2_TARGETS.filter((target) => target.body === 'multipart'),
    mix: { framing: 0.05, headers: 0.03, url: 0.03, method: 0.02, version: 0.02, auth: 0.05, pipeline: 0.02 },
    cases: 3000,
  },
  {
    name: 'queue-v1',
    what: '/queue (drop-in, and its stored requests) and /v1 files and vector stores',
    targets: [...QUEUE_TARGETS, ...V1_TARGETS],
    mix: { framing: 0.03, headers: 0.03, url: 0.08, method: 0.03, version: 0.02, auth: 0.08, pipeline: 0.03 },
    cases: 3000,
  },
  {
    name: 'admin',
    what: '/admin',
    targets: ADMIN_TARGETS,
    mix: { framing: 0.03, headers: 0.03, url: 0.2, method: 0.05, version: 0.02, auth: 0.1, pipeline: 0.03 },
    cases: 2500,
  },
  {
    name: 'rag-auth',
    // No URL, method or header mutations: they are answered before any route is known (an
    // unknown path, a 405, a missing Host), in OpenAI's shape, by the app's dispatch.
    what: 'RAG gateway login, refresh, /me and JWKS (FastAPI-shaped errors)',
    targets: RAG_AUTH_TARGETS,
    mix: { framing: 0.05, headers: 0, url: 0, method: 0, version: 0.02, auth: 0.15, pipeline: 0.03 },
    cases: 1000,
  },
  {
    name: 'rag',
    // As rag-auth: URL, method and header mutations are answered before a service is
    // known, in OpenAI's shape; test/rag/traversal.test.ts attacks the paths.
    what: 'the RAG services behind the gateway (FastAPI-shaped errors)',
    targets: RAG_TARGETS,
    mix: { framing: 0.05, headers: 0, url: 0, method: 0, version: 0.02, auth: 0.15, pipeline: 0.03 },
    cases: 2000,
  },
  {
    name: 'portal',
    // No URL or header mutations: a mangled URL is mostly no longer the portal's, and a
    // missing Host or an odd Expect is refused before any route is known; both in OpenAI's
    // shape. Other methods on a portal URL are the portal's 405 page. Here the cookie, the
    // CSRF token, Origin and Sec-Fetch-Site and the form itself are what is attacked.
    what: 'the key portal in a browser: pages, session cookie, forms and their CSRF token (HTML errors)',
    targets: PORTAL_TARGETS,
    mix: { framing: 0.05, headers: 0, url: 0, method: 0.05, version: 0.02, auth: 0.15, pipeline: 0.03 },
    cases: 1500,
  },
  {
    name: 'tenant-ids',
    // Bodies are what is attacked here: another owner's ids stand in every field that can
    // name an object, and the mutations move, retype, repeat or remove what is around them.
    what: "another owner's ids in every field of a body that can name an object (a recording upstream must never see one)",
    targets: FOREIGN_ID_TARGETS,
    mix: { framing: 0.02, headers: 0.02, url: 0.02, method: 0.02, version: 0.01, auth: 0.05, pipeline: 0.03 },
    cases: 1000,
    everythingUpstream: true,
  },
  {
    name: 'anthropic',
    // No URL, method or header-junk mutations: they are answered before any route is known
    // (an unknown path, a 405, a missing Host), in OpenAI's shape, by the app's dispatch.
    // What is attacked here is the body, the key (x-api-key or bearer) and anthropic-version.
    what: "Anthropic's Messages API (/v1/messages, count_tokens, /queue/v1/messages): Anthropic-shaped answers only",
    targets: ANTHROPIC_TARGETS,
    mix: { framing: 0.03, headers: 0, url: 0, method: 0, version: 0.02, auth: 0.12, pipeline: 0.03 },
    cases: 400,
  },
  {
    name: 'http',
    what: 'HTTP framing, headers and request lines, every route',
    targets: [...V2_TARGETS, ...QUEUE_TARGETS, ...V1_TARGETS, ...ADMIN_TARGETS, ...PROBE_TARGETS],
    mix: { framing: 0.3, headers: 0.3, url: 0.3, method: 0.15, version: 0.15, auth: 0.15, pipeline: 0.15 },
    cases: 2500,
  },
]

export function fuzzPart(name: string): FuzzPart {
  const part = FUZZ_PARTS.find((p) => p.name === name)
  if (part === undefined) throw new Error(`no fuzz part ${name}`)
  return part
}
