// The longest prefix of a text within a number of tokens: how the mock backend cuts a
// reply (JSON arguments, structured content) at a request's own token limit, mid-value,
// as a real model's would be. Counted by the worker's encoder (worker.ts), or by the
// estimate when the worker cannot answer (counter.ts).

/** A prefix: its length in UTF-16 units, and its tokens. */
export interface Prefix {
  readonly length: number
  readonly tokens: number
}

/**
 * The whole text if it is within `limit` tokens, else its longest prefix that is (a
 * prefix's count grows with its length, near enough for BPE: a binary search), never
 * ending between the halves of a surrogate pair.
 */
export function longestPrefixWithin(count: (text: string) => number, text: string, limit: number): Prefix {
  const whole = count(text)
  if (whole <= limit) return { length: text.length, tokens: whole }
  let low = 0
  let high = text.length
  while (low < high) {
    const mid = Math.ceil((low + high) / 2)
    if (count(text.slice(0, mid)) <= limit) low = mid
    else high = mid - 1
  }
  if (low > 0 && /[\uD800-\uDBFF]/.test(text.charAt(low - 1))) low -= 1
  return { length: low, tokens: count(text.slice(0, low)) }
}
