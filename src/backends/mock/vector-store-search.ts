// POST /vector_stores/{id}/search: the query is embedded like the chunks were, and every
// chunk of the store's completed files (those whose attributes pass the filters) is scored
// by cosine similarity, the best of several queries counting. Results at or above the score
// threshold come best first, at most max_num_results of them, ties in attach order.
//
// Visual RAG (the provider's guides/visual-rag page): page images are chunks too, answered
// as `{"type": "base64", "text": <data URL>}` with their page_number. With top_k_texts or
// top_k_images, texts and images are ranked apart, each kind capped by its own top_k (an
// unset one by max_num_results, or 10), and the two merged best first.
import type { z } from 'zod'
import type { SearchRequest, SearchResultsPageObject } from '../../api/vector-stores.ts'
import { matchesFilter } from './attribute-filter.ts'
import { embedVector } from './embeddings.ts'
import { VECTOR_DIMENSIONS } from './vector-store-ingest.ts'
import type { AttachedFile, IndexedChunk, StoreRecord } from './vector-store-records.ts'

const DEFAULT_RESULTS = 10

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0
  for (let i = 0; i < a.length; i++) sum += (a[i] ?? 0) * (b[i] ?? 0)
  return sum
}

interface Hit {
  readonly file: AttachedFile
  readonly chunk: IndexedChunk
  readonly score: number
  readonly order: number
}

type Request = z.output<typeof SearchRequest>

const best = (a: Hit, b: Hit): number => b.score - a.score || a.order - b.order

/** The hits the request keeps, best first. */
function kept(hits: Hit[], request: Request): Hit[] {
  const max = request.max_num_results ?? DEFAULT_RESULTS
  if (request.top_k_texts === undefined && request.top_k_images === undefined) return hits.sort(best).slice(0, max)
  const texts = hits
    .filter((h) => h.chunk.image === undefined)
    .sort(best)
    .slice(0, request.top_k_texts ?? max)
  const images = hits
    .filter((h) => h.chunk.image !== undefined)
    .sort(best)
    .slice(0, request.top_k_images ?? max)
  return [...texts, ...images].sort(best)
}

export function search(store: StoreRecord, request: Request): SearchResultsPageObject {
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
      if (score >= threshold) hits.push({ file, chunk, score, order: hits.length })
    }
  }
  return {
    object: 'vector_store.search_results.page',
    search_query: queries,
    data: kept(hits, request).map(({ file, chunk, score }) => ({
      file_id: file.id,
      filename: file.filename,
      score,
      attributes: file.attributes,
      ...(chunk.image === undefined
        ? { content: [{ type: 'text' as const, text: chunk.text }] }
        : { content: [{ type: 'base64' as const, text: chunk.image.dataUrl }], page_number: chunk.image.page }),
    })),
    has_more: false,
    next_page: null,
  }
}
