// Who a client is, for the per-address connection cap, the failed-authentication throttle
// and the audit log. Without proxies in front (trustProxyHops 0) it is the socket's peer;
// behind n proxies that each append to X-Forwarded-For it is the n-th entry from the right
// (the entries further left are whatever the client claimed).
import type { IncomingMessage } from 'node:http'
import { isIPv6 } from 'node:net'
import { TLSSocket } from 'node:tls'

export function clientAddress(req: IncomingMessage, trustProxyHops: number): string {
  return addressKey(clientIp(req, trustProxyHops))
}

/**
 * The client's own address, as said above, not grouped into a counting unit: what the
 * audit log records. An IPv4-mapped IPv6 address is unwrapped; anything is cut to 64 characters.
 */
export function clientIp(req: IncomingMessage, trustProxyHops: number): string {
  const peer = req.socket.remoteAddress ?? 'unknown'
  const header = req.headers['x-forwarded-for']
  const entries =
    trustProxyHops <= 0
      ? []
      : (Array.isArray(header) ? header.join(',') : (header ?? ''))
          .split(',')
          .map((e) => e.trim())
          .filter((e) => e !== '')
  const address = trustProxyHops <= 0 ? peer : (entries[entries.length - trustProxyHops] ?? peer)
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  return (mapped?.[1] ?? address).slice(0, 64)
}

/**
 * The scheme the client used: https over TLS here, or (behind trusted proxies) as the
 * nearest proxy's X-Forwarded-Proto says; otherwise http.
 */
export function clientScheme(req: IncomingMessage, trustProxyHops: number): 'http' | 'https' {
  if (req.socket instanceof TLSSocket) return 'https'
  if (trustProxyHops <= 0) return 'http'
  const header = req.headers['x-forwarded-proto']
  const value = (Array.isArray(header) ? header[0] : header)?.split(',')[0]?.trim().toLowerCase()
  return value === 'https' ? 'https' : 'http'
}

/**
 * The unit one client is counted by. An IPv4 address as it is (an IPv4-mapped IPv6 one
 * unwrapped); an IPv6 address by its /64, since anyone with one IPv6 address has the
 * 2^64 addresses of their subnet to rotate through. Anything else is cut to a bounded
 * length so it can key a map.
 */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address)
  if (mapped?.[1] !== undefined) return mapped[1]
  if (!isIPv6(address)) return address.slice(0, 64)
  return `${expandIPv6(address).slice(0, 4).join(':')}::/64`
}

/** The eight 16-bit groups of an IPv6 address, zero-padded and lower case. */
function expandIPv6(address: string): string[] {
  const [head = '', tail] = address.toLowerCase().split('%', 1)[0]?.split('::') ?? ['']
  const left = head === '' ? [] : head.split(':')
  const right = tail === undefined || tail === '' ? [] : tail.split(':')
  // An embedded IPv4 tail (::1.2.3.4) is two groups; only the first four groups matter here.
  const missing = Math.max(0, 8 - left.length - right.length)
  const groups = tail === undefined ? left : [...left, ...Array<string>(missing).fill('0'), ...right]
  return groups.map((g) => g.padStart(4, '0'))
}
