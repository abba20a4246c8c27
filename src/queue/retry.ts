// When a queued call tries again, and how long it waits first.
import type { Usage } from '../backends/port.ts'
import { GatewayError } from '../errors.ts'
import type { Admission, AdmissionRequest, SettleHow } from '../limits/port.ts'

const MAX_BACKOFF_MS = 60_000

/**
 * How long until a refused admission may succeed, when waiting is the cure: a 429 over
 * a window's limit (its retry-after-ms), or a limiter that cannot reach its store for a
 * moment (retry-after). Undefined for refusals no wait cures (can never fit, quota spent).
 */
export function retryAfterMs(error: unknown): number | undefined {
  if (!(error instanceof GatewayError)) return undefined
  if (error.status === 429) {
    const ms = Number(error.headers['retry-after-ms'])
    return Number.isFinite(ms) && ms > 0 ? ms : undefined
  }
  if (error.errorName === 'store_unavailable' || error.errorName === 'budget_unavailable') {
    const seconds = Number(error.headers['retry-after'])
    return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : undefined
  }
  return undefined
}

/** An upstream answer that is put back in line rather than answered. */
export function upstreamRetryable(status: number): boolean {
  return status === 429 || status >= 500
}

/** Backoff before try `attempt` (1 = the first retry): doubling from `baseMs`, ±20 % so retries don't move in step. */
export function backoffMs(baseMs: number, attempt: number): number {
  const plain = Math.min(baseMs * 2 ** Math.max(0, attempt - 1), MAX_BACKOFF_MS)
  return Math.round(plain * (0.8 + Math.random() * 0.4))
}

/**
 * The admission, with `onGiveBack` called once it settles below its reservation on a
 * windowed token limit: tokens came back to the window, and the line's head may fit
 * before its retry-after. (Requests per minute only come back when the window ends.)
 */
export function withGiveBack(
  admission: Admission,
  request: AdmissionRequest,
  extraHeaders: Readonly<Record<string, string>>,
  onGiveBack: () => void,
): Admission {
  const { limits, estimate } = request
  const tokenLimited = limits.tpm !== undefined || limits.input_tpm !== undefined || limits.output_tpm !== undefined
  return {
    headers: { ...admission.headers, ...extraHeaders },
    async settle(usage: Usage, how?: SettleHow) {
      await admission.settle(usage, how)
      if (tokenLimited && usage.inputTokens + usage.outputTokens < estimate.inputTokens + estimate.outputTokens)
        onGiveBack()
    },
  }
}

/** Resolves at `at` (epoch ms), or false at once when `signal` fires first. One timer, cleared either way. */
export function waitUntil(at: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false)
    const onAbort = (): void => {
      clearTimeout(timer)
      resolve(false)
    }
    const timer = setTimeout(
      () => {
        signal.removeEventListener('abort', onAbort)
        resolve(true)
      },
      Math.max(0, at - Date.now()),
    )
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
