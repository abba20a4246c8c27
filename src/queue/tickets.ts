// Names of lines and tickets as the stores keep them. A line is one (API key, model): the
// limiter's unit, so calls that compete for the same counters wait in the same line, and
// a key's calls for another model do not wait behind them.
import type { QueuedRequest, Ticket } from './ports.ts'

const enc = encodeURIComponent

export function lineOf(keyId: string, model: string): string {
  return `${enc(keyId)}:${enc(model)}`
}

export function parseLine(line: string): { keyId: string; model: string } {
  const [keyId = '', model = ''] = line.split(':')
  return { keyId: decodeURIComponent(keyId), model: decodeURIComponent(model) }
}

/** A stored request's ticket: it keeps its place (and its join time) across retries. */
export function jobTicket(request: Pick<QueuedRequest, 'id' | 'createdAt'>): Ticket {
  return { kind: 'job', id: request.id, joinedAt: request.createdAt }
}

/** One string per ticket; ids and instance names never contain ':'. */
export function encodeTicket(ticket: Ticket): string {
  return ticket.kind === 'call'
    ? `call:${ticket.instance}:${ticket.id}:${ticket.joinedAt}`
    : `job:${ticket.id}:${ticket.joinedAt}`
}

export function decodeTicket(text: string): Ticket | null {
  const parts = text.split(':')
  if (parts[0] === 'call' && parts.length === 4) {
    return { kind: 'call', instance: parts[1] ?? '', id: parts[2] ?? '', joinedAt: Number(parts[3]) }
  }
  if (parts[0] === 'job' && parts.length === 3) return { kind: 'job', id: parts[1] ?? '', joinedAt: Number(parts[2]) }
  return null
}

export function sameTicket(a: Ticket, b: Ticket): boolean {
  return encodeTicket(a) === encodeTicket(b)
}
