// What a request to an unknown URL most likely meant, for the 404's message: the same path
// under the other API prefix (inference is under /v2, vector stores under /v1), or the
// model list for a path that names nothing the gateway serves.
const PREFIXES = ['/v1', '/v2'] as const

/** The 404's message for this method and URL; `served` says whether another URL is routed. */
export function unknownRouteMessage(
  method: string,
  url: string,
  served: (method: string, url: string) => boolean,
): string {
  const path = url.split('?', 1)[0] ?? url
  for (const from of PREFIXES) {
    if (!path.startsWith(`${from}/`)) continue
    const rest = path.slice(from.length)
    for (const to of PREFIXES) {
      if (to === from || !served(method, `${to}${rest}`)) continue
      return to === '/v2'
        ? `Unknown request URL: ${method} ${from}${rest}. Inference is served under /v2: ${method} /v2${rest} (an OpenAI SDK's baseURL ends in /v2).`
        : `Unknown request URL: ${method} ${from}${rest}. Files and vector stores are served under /v1: ${method} /v1${rest}.`
    }
  }
  return 'Unknown request URL. Check the path and the method; GET / lists where the API, its reference (/redoc) and the models (/v2/models) are.'
}
