import type { Test } from 'tap'

/** The promise rejects with an API error of this HTTP status (the openai SDK's APIError). */
export async function rejectsWith(
  t: Test,
  promise: Promise<unknown>,
  status: number,
  message = `rejects with ${status}`,
): Promise<void> {
  try {
    await promise
    t.fail(`${message}: it resolved`)
  } catch (err) {
    t.equal((err as { status?: number }).status, status, message)
  }
}
