// The model list in Anthropic's shape (GET /v1/models, /v1/models/{id}), for a caller that
// speaks Anthropic (it sends `anthropic-version`, as Anthropic's SDKs always do): the same
// models the key may use that /v2/models lists, as ModelInfo objects, paged by Anthropic's
// `limit`, `after_id` and `before_id`.
import { gatewayError } from '../../errors.ts'
import type { ModelObject } from '../../inference/models.ts'

export interface AnthropicModelInfo {
  readonly type: 'model'
  readonly id: string
  readonly display_name: string
  /** RFC 3339. */
  readonly created_at: string
}

export interface AnthropicModelPage {
  readonly data: readonly AnthropicModelInfo[]
  readonly first_id: string | null
  readonly last_id: string | null
  readonly has_more: boolean
}

const DEFAULT_LIMIT = 20
const MAX_LIMIT = 1000

export function modelInfoOf(model: ModelObject): AnthropicModelInfo {
  return {
    type: 'model',
    id: model.id,
    display_name: model.meta_data.display_name,
    created_at: new Date(model.created * 1000).toISOString(),
  }
}

/** One page of `models` (in the catalogue's order) by Anthropic's paging parameters; a bad one is a 400. */
export function modelPageOf(models: readonly ModelObject[], query: URLSearchParams): AnthropicModelPage {
  const limitText = query.get('limit')
  const limit = limitText === null ? DEFAULT_LIMIT : Number(limitText)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT)
    throw gatewayError('invalid_body', {
      message: `limit: must be a whole number from 1 to ${MAX_LIMIT}.`,
      param: 'limit',
    })
  const after = query.get('after_id')
  const before = query.get('before_id')
  let from = 0
  let to = models.length
  if (after !== null) from = models.findIndex((m) => m.id === after) + 1
  if (before !== null) {
    const at = models.findIndex((m) => m.id === before)
    to = at === -1 ? models.length : at
    from = Math.max(from, to - limit)
  }
  const page = models.slice(from, Math.min(to, from + limit)).map(modelInfoOf)
  return {
    data: page,
    first_id: page[0]?.id ?? null,
    last_id: page[page.length - 1]?.id ?? null,
    has_more: before !== null ? from > 0 : from + page.length < to,
  }
}
