// A status as a message names it: "431 (Request Header Fields Too Large)".
import { http } from './node-http.ts'

const { STATUS_CODES } = http

export function statusWithReason(status: number): string {
  const reason = STATUS_CODES[status]
  return reason === undefined ? String(status) : `${status} (${reason})`
}
