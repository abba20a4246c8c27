// The hop-by-hop headers (RFC 9110 §7.6.1, with the older proxy-connection and keep-alive):
// they describe one connection, so no hop passes them on. Every place that relays headers,
// either way, starts from this one list.
export const HOP_BY_HOP_HEADERS: readonly string[] = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'proxy-authenticate',
]
