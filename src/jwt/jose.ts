// jose, loaded by the first token signed or verified (a login, a RAG request with a token),
// not at boot: a gateway whose RAG gateway nobody signs in to never holds it. Loading it
// takes a few milliseconds of the first such call.
import type * as JoseModule from 'jose'

type Jose = typeof JoseModule

let loading: Promise<Jose> | undefined

export function loadJose(): Promise<Jose> {
  loading ??= import('jose')
  return loading
}
