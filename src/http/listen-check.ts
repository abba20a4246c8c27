// A listener's address, and what to say when it cannot be had. Checked before the gateway
// opens its stores or makes any secret, so that a second `npm start` (or a clash on the
// metrics port) fails at once, with the setting to change, and a fresh data directory does
// not get an admin token printed by a gateway that then fails to start.
import { createServer, type AddressInfo, type Server } from 'node:net'

export interface ListenerSpec {
  /** For messages: "public listener", "metrics listener". */
  readonly what: string
  readonly host: string
  readonly port: number
  /** The settings that choose it, for messages. */
  readonly portEnv: string
  readonly hostEnv: string
  readonly portFlag: string
  readonly portKey: string
}

export const publicListener = (host: string, port: number): ListenerSpec => ({
  what: 'public listener',
  host,
  port,
  portEnv: 'PORT',
  hostEnv: 'HOST',
  portFlag: '--port',
  portKey: 'server.port',
})

export const metricsListener = (host: string, port: number): ListenerSpec => ({
  what: 'metrics listener',
  host,
  port,
  portEnv: 'METRICS_PORT',
  hostEnv: 'METRICS_HOST',
  portFlag: '--metrics-port',
  portKey: 'server.metricsPort',
})

/** One line an operator can act on, for an error of listen(). */
export function listenFailure(spec: ListenerSpec, err: NodeJS.ErrnoException): string {
  const where = `${spec.host}:${spec.port}`
  const other = spec.port === 0 || spec.port === 65535 ? 8081 : spec.port + 1
  const change = `another port with ${spec.portEnv} (${spec.portEnv}=${other} npm start), \`tollgate serve ${spec.portFlag} ${other}\`, or ${spec.portKey} in the config file`
  switch (err.code) {
    case 'EADDRINUSE':
      return `${where}, the ${spec.what} (${spec.portEnv}), is already in use: another Tollgate or another program listens there. Stop it, or choose ${change}.`
    case 'EACCES':
      return `${where}, the ${spec.what} (${spec.portEnv}): not allowed to listen there (ports below 1024 need privileges). Choose ${change}.`
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${spec.host}, the host of the ${spec.what} (${spec.hostEnv}), is not an address of this machine (${err.code}). Set ${spec.hostEnv} to one of its addresses: 127.0.0.1 (this machine only) or 0.0.0.0 (every interface).`
    default:
      return `cannot listen on ${where}, the ${spec.what}: ${err.code ?? err.message}.`
  }
}

/**
 * Resolves when the address can be listened on (by binding it and letting go at once);
 * rejects with listenFailure's message otherwise. Port 0 (any free port) is not checked.
 */
export function checkListenable(spec: ListenerSpec): Promise<void> {
  if (spec.port === 0) return Promise.resolve()
  return new Promise((done, fail) => {
    const probe = createServer()
    probe.once('error', (err: NodeJS.ErrnoException) => fail(new Error(listenFailure(spec, err), { cause: err })))
    probe.listen({ port: spec.port, host: spec.host, exclusive: true }, () => probe.close(() => done()))
  })
}

/**
 * The URL a listening server answers on, for the startup line and callers on this machine:
 * a wildcard bind (0.0.0.0, ::) is reached by its loopback address.
 */
export function addressOf(server: Server): string {
  const address = server.address() as AddressInfo
  const host =
    address.family === 'IPv6'
      ? `[${address.address === '::' ? '::1' : address.address}]`
      : address.address === '0.0.0.0'
        ? '127.0.0.1'
        : address.address
  return `http://${host}:${address.port}`
}
