// POST /vector_stores/{id}/search: the query is embedded like the chunks were, and every
// chunk of the store's completed files (those whose attributes pass the filters) is scored
// by cosine similarity, the best of several queries counting. Results at or above the score
// threshold come best first, at most max_num_results of them, ties in attach order.
import type { z } from 'zod'
import type { SearchRequest, SearchResultsPageObject } from '../../api/vector-stores.ts'
import { matchesFilter } from './attribute-filter.ts'
import { embedVector } from './embeddings.ts'
import { VECTOR_DIMENSIONS } from './vector-store-ingest.ts'
import type { AttachedFile, StoreRecord } from './vector-store-records.ts'

const DEFAULT_RESULTS = 10

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0
  for (let i = 0; i < a.length; i++) sum += (a[i] ?? 0) * (b[i] ?? 0)
  return sum
}

interface Hit {
  readonly file: AttachedFile
  readonly text: string
  readonly score: number
  readonly order: number
}

export function search(store: StoreRecord, request: z.output<typeof SearchRequest>): SearchResultsPageObject {
  const queries = typeof request.query === 'string' ? [request.query] : request.query
  const vectors = queries.map((q) => embedVector(q, VECTOR_DIMENSIONS))
  const threshold = request.ranking_options?.score_threshold ?? 0
  const hits: Hit[] = []
  for (const file of store.files.values()) {
    if (file.status !== 'completed') continue
    if (request.filters !== undefined && !matchesFilter(file.attributes, request.filters)) continue
    for (const chunk of file.chunks) {
      let best = 0
      for (const vector of vectors) best = Math.max(best, dot(vector, chunk.vector))
      // Rounding can take a perfect match a hair over 1.
      const score = Math.min(1, best)
      if (score >= threshold) hits.push({ file, text: chunk.text, score, order: hits.length })
    }
  }
  hits.sort((a, b) => b.score - a.score || a.order - b.order)
  return {
    object: 'vector_store.search_results.page',
    search_query: queries,
    data: hits.slice(0, request.max_num_results ?? DEFAULT_RESULTS).map((hit) => ({
      file_id: hit.file.id,
      filename: hit.file.filename,
      score: hit.score,
      attributes: hit.file.attributes,
      content: [{ type: 'text' as const, text: hit.text }],
    })),
    has_more: false,
    next_page: null,
  }
}
