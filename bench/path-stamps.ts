// A preload for bench/path-timeline.ts (`node --import ./bench/path-stamps.ts src/cli.ts serve`):
// stamps, with process.hrtime, the events of each call on a gateway that serves one call at
// a time: the request's arrival (the server's 'request' event, its headers parsed), every
// write to and read from Redis and the upstream (by the socket's remote port), every write
// to the client's socket, the response's 'finish', and every setImmediate / setTimeout
// callback that runs (and, from every tenth call, where it was scheduled), until the next
// request arrives. Written
// to PATH_STAMPS_OUT as JSON when the process exits. Diagnostic only: it never loads in a
// gateway that is not started with it, and costs that gateway nothing.
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import { syncBuiltinESMExports } from 'node:module'
import net from 'node:net'
import timers from 'node:timers'

type Stamp = [ms: number, label: string]

const out = process.env.PATH_STAMPS_OUT ?? ''
const redisPort = Number(process.env.PATH_STAMPS_REDIS_PORT ?? 0)
const upstreamPort = Number(process.env.PATH_STAMPS_UPSTREAM_PORT ?? 0)
const calls: Stamp[][] = []
let current: Stamp[] | null = null
let t0 = 0
const now = (): number => Number(process.hrtime.bigint()) / 1e6
const stamp = (label: string): void => {
  if (current !== null) current.push([now() - t0, label])
}

/** The first frame of the gateway's own code (or a dependency) that scheduled a callback. */
function siteOf(): string {
  const lines = (new Error().stack ?? '').split('\n').slice(3)
  const frame = lines.find((l) => l.includes('/src/') || l.includes('node_modules')) ?? lines[0] ?? ''
  return frame
    .replace(/^\s*at\s+/, '')
    .replace(/\(?file:\/\/\S*?\/(src|node_modules)\//, '$1/')
    .replace(/\)$/, '')
}

function peerOf(socket: net.Socket): string | null {
  if ((socket as net.Socket & { server?: unknown }).server != null) return 'client'
  if (socket.remotePort === redisPort) return 'redis'
  if (socket.remotePort === upstreamPort) return 'upstream'
  return null
}

const proto = net.Socket.prototype as unknown as {
  _writeGeneric(this: net.Socket, writev: boolean, data: unknown, encoding: string, cb: unknown): unknown
  push(this: net.Socket, chunk: unknown, encoding?: string): boolean
}
const writeGeneric = proto._writeGeneric
proto._writeGeneric = function (writev, data, encoding, cb) {
  const peer = peerOf(this)
  if (peer !== null) stamp(`${peer} write`)
  return writeGeneric.call(this, writev, data, encoding, cb)
}
const push = proto.push
proto.push = function (chunk, encoding) {
  if (chunk !== null) {
    const peer = peerOf(this)
    if (peer !== null) stamp(`${peer} data`)
  }
  return push.call(this, chunk, encoding)
}

const emit = http.Server.prototype.emit as (this: http.Server, event: string | symbol, ...args: unknown[]) => boolean
http.Server.prototype.emit = function (this: http.Server, event: string | symbol, ...args: unknown[]) {
  if (event === 'request') {
    const [req, res] = args as [http.IncomingMessage, http.ServerResponse]
    if (req.url?.startsWith('/v2/') === true) {
      t0 = now()
      current = [[0, 'request']]
      calls.push(current)
      req.once('end', () => stamp('request body end'))
      res.once('finish', () => stamp('response finish'))
    } else current = null
  }
  return emit.call(this, event, ...args)
} as typeof http.Server.prototype.emit

type Scheduler = (callback: (...a: unknown[]) => void, ...rest: unknown[]) => unknown
/** Where callbacks were scheduled, from every SITE_EVERY-th call only (a stack costs tens of µs). */
const sites: Record<string, number> = {}
const SITE_EVERY = 10
function wrapped(kind: string, original: Scheduler): Scheduler {
  return function (callback, ...rest) {
    if (current === null) return original(callback, ...rest)
    if (calls.length % SITE_EVERY === 0) {
      const site = `${kind} ${siteOf()}`
      sites[site] = (sites[site] ?? 0) + 1
    }
    const run = function (this: unknown, ...a: unknown[]): unknown {
      stamp(kind)
      return callback.apply(this, a)
    }
    return original(run, ...rest)
  }
}
const setImmediateOriginal = globalThis.setImmediate as unknown as Scheduler
const setTimeoutOriginal = globalThis.setTimeout as unknown as Scheduler
globalThis.setImmediate = wrapped('immediate', setImmediateOriginal) as unknown as typeof setImmediate
globalThis.setTimeout = wrapped('timeout', setTimeoutOriginal) as unknown as typeof setTimeout
;(timers as { setImmediate: unknown }).setImmediate = globalThis.setImmediate
;(timers as { setTimeout: unknown }).setTimeout = globalThis.setTimeout
syncBuiltinESMExports()

process.on('exit', () => {
  if (out !== '') writeFileSync(out, JSON.stringify({ calls, sites }))
})

// Named points of the gateway's own code, when a temporary probe calls them (never committed).
;(globalThis as { __pathStamp?: (label: string) => void }).__pathStamp = stamp
