// Reading a request body at a pace the gateway can live with. Node's requestTimeout is a
// total (a 100 MiB upload on a slow link would need it huge, and then it bounds nothing),
// so instead the body must keep arriving: at least minBytesPerSecond over every window
// while the gateway is reading it. A slow-upload attacker holds a connection for one
// window at most; a large upload at any sensible pace takes as long as it needs.
import type { IncomingMessage } from 'node:http'
import { gatewayError } from '../errors.ts'

export interface BodyRate {
  /** 0: only a window in which not one byte arrived cuts the body. */
  readonly minBytesPerSecond: number
  readonly windowMs: number
}

/** The pace of the server section of the configuration. */
export function bodyRateOf(server: {
  readonly bodyMinBytesPerSecond: number
  readonly bodyRateWindowMs: number
}): BodyRate {
  return { minBytesPerSecond: server.bodyMinBytesPerSecond, windowMs: server.bodyRateWindowMs }
}

/** The fewest bytes a window must bring: at least one, so that an idle window always cuts. */
function minBytesPerWindow(rate: BodyRate): number {
  return Math.max(1, Math.floor((rate.minBytesPerSecond * rate.windowMs) / 1000))
}

/**
 * Feeds the body to `onChunk` as it arrives. onChunk may throw to stop (the body is too
 * large) or return a promise to hold the body back (a slow disk); time spent holding it
 * back is not held against the client. Rejects with request_timeout when the body is too
 * slow. On any rejection the request is left paused with its rest unread, so the caller
 * can still answer: the error handler decides whether to drain it or close.
 */
export function readBodyChunks(
  req: IncomingMessage,
  rate: BodyRate | undefined,
  onChunk: (chunk: Buffer) => void | Promise<void>,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false
    let windowBytes = 0
    let timer: NodeJS.Timeout | undefined
    const minPerWindow = rate === undefined ? 0 : minBytesPerWindow(rate)

    const arm = (): void => {
      if (rate === undefined) return
      clearTimeout(timer)
      windowBytes = 0
      timer = setTimeout(() => {
        if (windowBytes < minPerWindow) {
          stop(
            gatewayError('request_timeout', {
              message: `The request body arrived too slowly: less than ${minPerWindow} bytes in ${rate.windowMs} ms.`,
              headers: { connection: 'close' },
            }),
          )
        } else {
          arm()
        }
      }, rate.windowMs)
    }

    const onData = (chunk: Buffer): void => {
      windowBytes += chunk.length
      let held: void | Promise<void>
      try {
        held = onChunk(chunk)
      } catch (err) {
        stop(err)
        return
      }
      if (held === undefined) return
      req.pause()
      clearTimeout(timer)
      held.then(
        () => {
          if (settled) return
          arm()
          req.resume()
        },
        (err: unknown) => stop(err),
      )
    }
    const onEnd = (): void => stop()
    const onError = (): void => stop(endedEarly())
    const onClose = (): void => stop(req.complete ? undefined : endedEarly())

    function stop(err?: unknown): void {
      if (settled) return
      settled = true
      clearTimeout(timer)
      req.off('data', onData)
      req.off('end', onEnd)
      req.off('error', onError)
      req.off('close', onClose)
      if (err === undefined) {
        resolve()
      } else {
        req.pause()
        reject(err)
      }
    }

    // An error after the reading stopped (a reset while the answer goes out) has nobody
    // else to hear it, and an unheard 'error' would end the process.
    req.on('error', ignore)
    req.on('data', onData)
    req.once('end', onEnd)
    req.once('error', onError)
    req.once('close', onClose)
    arm()
  })
}

function ignore(): void {}

/** The client closed or reset the connection mid-body; it will not read the answer, but the log will. */
function endedEarly(): Error {
  return gatewayError('invalid_body', { message: 'The request body ended before its declared end.' })
}

/**
 * The same pace for a body the gateway streams on instead of reading (the RAG relay pipes
 * it to a backend): `onTooSlow` is called once a window passes with less than the pace
 * while the body was flowing. A window in which the receiver held the body back
 * (backpressure paused it) is not held against the client. Returns a function that stops
 * watching; the end or close of the body stops it too.
 */
export function watchBodyPace(req: IncomingMessage, rate: BodyRate, onTooSlow: () => void): () => void {
  const minPerWindow = minBytesPerWindow(rate)
  let windowBytes = 0
  let heldBack = false
  const onData = (chunk: Buffer): void => {
    windowBytes += chunk.length
  }
  const onPause = (): void => {
    heldBack = true
  }
  const timer = setInterval(() => {
    if (!heldBack && req.readableFlowing !== false && windowBytes < minPerWindow) {
      stop()
      onTooSlow()
      return
    }
    windowBytes = 0
    heldBack = req.readableFlowing === false
  }, rate.windowMs)
  function stop(): void {
    clearInterval(timer)
    req.off('data', onData)
    req.off('pause', onPause)
    req.off('end', stop)
    req.off('close', stop)
  }
  req.on('data', onData)
  req.on('pause', onPause)
  req.once('end', stop)
  req.once('close', stop)
  return stop
}
