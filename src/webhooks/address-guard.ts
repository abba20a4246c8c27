// Which addresses a webhook may be sent to. A webhook URL is chosen by whoever holds the
// admin token, and the gateway usually sits inside a network that trusts it: without this,
// a webhook is a way to make the gateway call its own metrics port, a cloud metadata
// service (169.254.169.254) or a database on the private network. Refused unless the
// config allows them (webhooks.allowAddresses): loopback, link-local, private and
// unique-local, carrier-grade NAT, multicast, unspecified, broadcast and reserved ranges,
// in IPv4 and IPv6, an IPv4 address inside IPv6 (::ffff:a.b.c.d, NAT64 64:ff9b::/96,
// ::a.b.c.d) judged as the IPv4 address it carries.
import { isIP } from 'node:net'

interface Range {
  readonly v6: boolean
  readonly base: bigint
  readonly bits: number
}

interface Refusal extends Range {
  readonly what: string
}

function parseV4(address: string): bigint | null {
  const parts = address.split('.')
  if (parts.length !== 4) return null
  let n = 0n
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null
    n = (n << 8n) | BigInt(Number(p))
  }
  return n
}

function parseV6(input: string): bigint | null {
  let address = input.toLowerCase()
  const zone = address.indexOf('%')
  if (zone !== -1) address = address.slice(0, zone)
  // A trailing dotted IPv4 part becomes two groups.
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(address)
  if (dotted !== null) {
    const v4 = parseV4(dotted[2] ?? '')
    if (v4 === null) return null
    address = `${dotted[1] ?? ''}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const halves = address.split('::')
  if (halves.length > 2) return null
  const head = halves[0] === '' ? [] : (halves[0] ?? '').split(':')
  const tail = halves.length === 2 ? (halves[1] === '' ? [] : (halves[1] ?? '').split(':')) : []
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail]
  let n = 0n
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/.test(g)) return null
    n = (n << 16n) | BigInt(parseInt(g, 16))
  }
  return n
}

/** An address as (family, number), an IPv4 address carried in IPv6 taken out of it. */
function numeric(address: string): { v6: boolean; n: bigint } | null {
  const family = isIP(address.replace(/%.*$/, ''))
  if (family === 4) {
    const n = parseV4(address)
    return n === null ? null : { v6: false, n }
  }
  if (family !== 6) return null
  const n = parseV6(address)
  if (n === null) return null
  const high96 = n >> 32n
  // ::ffff:a.b.c.d (mapped), 64:ff9b::a.b.c.d (NAT64), ::a.b.c.d (compatible, not :: or ::1).
  if (high96 === 0xffffn || high96 === 0x64ff9b0000000000000000n || (high96 === 0n && n > 1n))
    return { v6: false, n: n & 0xffffffffn }
  return { v6: true, n }
}

function range(cidr: string): Range {
  const [address = '', bitsText] = cidr.split('/')
  const parsed = numeric(address)
  if (parsed === null || isIP(address) === 0) throw new RangeError(`not an IP address or CIDR range: ${cidr}`)
  // An IPv4-carrying IPv6 range is its IPv4 range.
  const v6 = parsed.v6
  const width = v6 ? 128 : 32
  const given = bitsText === undefined ? width : Number(bitsText)
  const bits = isIP(address) === 6 && !v6 && bitsText !== undefined ? Math.max(0, given - 96) : given
  if (!Number.isInteger(bits) || bits < 0 || bits > width) throw new RangeError(`bad prefix length in ${cidr}`)
  return { v6, base: parsed.n, bits }
}

function contains(r: Range, v6: boolean, n: bigint): boolean {
  if (r.v6 !== v6) return false
  const shift = BigInt((v6 ? 128 : 32) - r.bits)
  return n >> shift === r.base >> shift
}

const REFUSED: readonly Refusal[] = (
  [
    ['0.0.0.0/8', 'an unspecified ("this network") address'],
    ['10.0.0.0/8', 'a private address'],
    ['100.64.0.0/10', 'a carrier-grade NAT address'],
    ['127.0.0.0/8', 'a loopback address'],
    ['169.254.0.0/16', 'a link-local address'],
    ['172.16.0.0/12', 'a private address'],
    ['192.0.0.0/24', 'a reserved (IETF protocol) address'],
    ['192.0.2.0/24', 'a documentation address'],
    ['192.168.0.0/16', 'a private address'],
    ['198.18.0.0/15', 'a benchmarking address'],
    ['198.51.100.0/24', 'a documentation address'],
    ['203.0.113.0/24', 'a documentation address'],
    ['224.0.0.0/4', 'a multicast address'],
    ['240.0.0.0/4', 'a reserved address'],
    ['::/128', 'an unspecified address'],
    ['::1/128', 'a loopback address'],
    ['100::/64', 'a discard address'],
    ['2001:db8::/32', 'a documentation address'],
    ['fc00::/7', 'a unique-local (private) address'],
    ['fe80::/10', 'a link-local address'],
    ['fec0::/10', 'a site-local address'],
    ['ff00::/8', 'a multicast address'],
  ] as const
).map(([cidr, what]) => ({ ...range(cidr), what }))

export interface AddressGuard {
  /** Why the gateway must not connect to this IP address, or null when it may. */
  refusal(address: string): string | null
}

/** `allow`: addresses or CIDR ranges let through although refused above (throws on a bad one). */
export function createAddressGuard(allow: readonly string[] = []): AddressGuard {
  const allowed = allow.map(range)
  return {
    refusal(address) {
      const parsed = numeric(address)
      if (parsed === null) return `${address} is not an IP address`
      if (allowed.some((r) => contains(r, parsed.v6, parsed.n))) return null
      const hit = REFUSED.find((r) => contains(r, parsed.v6, parsed.n))
      return hit === undefined ? null : `${address} is ${hit.what} (allow it in webhooks.allowAddresses)`
    },
  }
}

/** Whether each entry is an address or CIDR range (for the config's check): the first bad one, or null. */
export function badRange(entries: readonly string[]): string | null {
  for (const entry of entries) {
    try {
      range(entry)
    } catch {
      return entry
    }
  }
  return null
}
