// Method + path routing on find-my-way, with the 404 / 405 distinction the error table needs,
// and the one Router interface every route module registers its routes on.
import FindMyWay, { type HTTPMethod } from 'find-my-way'
import type { RequestContext } from './context.ts'

export type Params = Readonly<Record<string, string>>

/** A route's handler: the request, the path's parameters and the query string. */
export type RouteHandler = (ctx: RequestContext, params: Params, query: URLSearchParams) => Promise<void>

/**
 * What a route module (admin, queue, probes, portal, ...) adds its routes to. app.ts
 * passes its RouteTable; a module needs no more than `on`, so it never sees matching.
 */
export interface Router {
  on(method: HTTPMethod | HTTPMethod[], path: string, route: RouteHandler): unknown
}

export type Match<R> =
  | { readonly found: true; readonly route: R; readonly params: Params; readonly query: URLSearchParams }
  | { readonly found: false; readonly allow: readonly string[] }

const METHODS: readonly HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']

/** One registered route: a method and a path in find-my-way's syntax (`:id`, `*`). */
export interface RouteEntry {
  readonly method: HTTPMethod
  readonly path: string
}

/** The routes app.ts serves, and the matching of a request against them. */
export class RouteTable<R> {
  readonly #fmw = FindMyWay({ ignoreTrailingSlash: true, caseSensitive: true, maxParamLength: 256 })
  readonly #entries: RouteEntry[] = []
  #sealed = false

  on(method: HTTPMethod | HTTPMethod[], path: string, route: R): this {
    if (this.#sealed) throw new Error('routes are added before the first request')
    this.#fmw.on(method, path, () => undefined, route)
    for (const m of Array.isArray(method) ? method : [method]) this.#entries.push({ method: m, path })
    return this
  }

  /** Everything served, in the order it was added: what the API reference must cover. */
  routes(): readonly RouteEntry[] {
    return [...this.#entries]
  }

  match(method: string, url: string): Match<R> {
    this.#sealed = true
    const queryAt = url.indexOf('?')
    const path = queryAt === -1 ? url : url.slice(0, queryAt)
    const query = new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1))
    const verb = (METHODS as readonly string[]).includes(method) ? (method as HTTPMethod) : undefined
    const found = verb ? this.#fmw.find(verb, path) : null
    if (found) {
      const params: Record<string, string> = {}
      for (const [k, v] of Object.entries(found.params)) if (v !== undefined) params[k] = v
      return { found: true, route: found.store as R, params, query }
    }
    const allow = METHODS.filter((m) => m !== verb && this.#fmw.find(m, path) !== null)
    return { found: false, allow }
  }
}
