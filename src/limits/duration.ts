// Durations the way OpenAI writes them in x-ratelimit-reset-* (Go's time.Duration
// format at millisecond resolution): "0s", "20ms", "1s", "2.4s", "6m0s", "1h2m3s".

/** Formats a wait in milliseconds; fractions of a millisecond round up, never down. */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.ceil(ms))
  if (total === 0) return '0s'
  if (total < 1000) return `${total}ms`
  const hours = Math.floor(total / 3_600_000)
  const minutes = Math.floor(total / 60_000) % 60
  const millis = total % 60_000
  const whole = Math.floor(millis / 1000)
  const fraction = millis % 1000
  const seconds = fraction === 0 ? `${whole}` : `${whole}.${String(fraction).padStart(3, '0').replace(/0+$/, '')}`
  return `${hours > 0 ? `${hours}h` : ''}${hours > 0 || minutes > 0 ? `${minutes}m` : ''}${seconds}s`
}

const DURATION = /^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?$/
const MILLIS = /^(\d+(?:\.\d+)?)ms$/

/** Parses what formatDuration writes (and OpenAI's headers) back to milliseconds; null if it is no duration. */
export function parseDuration(text: string): number | null {
  const millis = MILLIS.exec(text)
  if (millis) return Number(millis[1])
  const parts = DURATION.exec(text)
  if (!parts || text === '' || (parts[1] === undefined && parts[2] === undefined && parts[3] === undefined)) return null
  return Number(parts[1] ?? 0) * 3_600_000 + Number(parts[2] ?? 0) * 60_000 + Math.round(Number(parts[3] ?? 0) * 1000)
}
