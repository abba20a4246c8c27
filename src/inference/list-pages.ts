// The upstream's further pages of a list, read by the gateway itself when ownership
// filtering left a page short (ownership.ts). Each is one more upstream call on the
// deployment that served the first page, with the same query and `after` moved on; one that
// fails, is not a 200 or is not JSON ends the filling, and the page goes out as it is.
import type { UpstreamResponse } from '../backends/port.ts'
import type { ListPaging } from './ownership.ts'

export interface ListPagingOptions {
  /** The list call's query; `after` is set per page. */
  readonly query: URLSearchParams
  /** Sends the list call with this query string (no leading `?`). */
  send(search: string): Promise<UpstreamResponse>
  /** Largest page body read. */
  readonly jsonLimitBytes: number
}

export function listPaging(options: ListPagingOptions): ListPaging {
  const asked = Number(options.query.get('limit'))
  return {
    limit: Number.isInteger(asked) && asked > 0 ? asked : undefined,
    async nextPage(after) {
      const query = new URLSearchParams(options.query)
      query.set('after', after)
      try {
        const response = await options.send(query.toString())
        if (response.status !== 200) {
          response.body.destroy()
          return null
        }
        const chunks: Buffer[] = []
        let size = 0
        for await (const chunk of response.body as AsyncIterable<Buffer>) {
          size += chunk.length
          if (size > options.jsonLimitBytes) {
            response.body.destroy()
            return null
          }
          chunks.push(chunk)
        }
        return JSON.parse(Buffer.concat(chunks, size).toString('utf8')) as unknown
      } catch {
        return null
      }
    },
  }
}
