// A server-sent event stream that releases its frames at a steady pace. Frames are drawn
// lazily from an iterator, so a long stream's events are serialised as they go out, and
// those never sent (the client left) are never serialised at all. Pacing uses a
// timer aimed at the next frame's due time (start + k / rate), not one fixed delay per
// frame, so timer lateness does not pile up and rates above 1000/s still average out.
import { Readable } from 'node:stream'

export interface Frame {
  readonly text: string
  /** Paced frames carry generated tokens; the others go out with the frame before them. */
  readonly paced: boolean
}

export const DONE_FRAME: Frame = { text: 'data: [DONE]\n\n', paced: false }

/** A chat/completions style frame: `data: {json}`. */
export function dataFrame(value: unknown, paced = false): Frame {
  return { text: `data: ${JSON.stringify(value)}\n\n`, paced }
}

/** A Responses API style frame: `event: <type>` then `data: {json}`. */
export function namedFrame(type: string, value: unknown, paced = false): Frame {
  return { text: `event: ${type}\ndata: ${JSON.stringify(value)}\n\n`, paced }
}

/**
 * Streams `frames`, `perSecond` paced frames a second. Aborting `signal`, or destroying the
 * stream from the reading side, clears the timer and ends the stream without another write.
 */
export function pacedStream(frames: Iterable<Frame>, perSecond: number, signal: AbortSignal): Readable {
  const iterator = frames[Symbol.iterator]()
  const intervalMs = 1000 / perSecond
  const startedAt = performance.now()
  let pacedSent = 0
  let pending: Frame | undefined
  let timer: NodeJS.Timeout | undefined
  // The reader is behind (push said so): nothing more until it asks, as a real server's
  // socket would stop taking writes. Frames due meanwhile go out when it does.
  let waiting = false

  const stop = (): void => {
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    signal.removeEventListener('abort', onAbort)
  }
  const stream = new Readable({
    // Frames are pushed on the clock; a fast reader only sees them sooner if they are due.
    read() {
      if (!waiting) return
      waiting = false
      pump()
    },
    destroy(err, callback) {
      stop()
      callback(err)
    },
  })
  function onAbort(): void {
    stream.destroy()
  }

  const pump = (): void => {
    timer = undefined
    while (!stream.destroyed) {
      if (pending === undefined) {
        const next = iterator.next()
        if (next.done === true) {
          stop()
          stream.push(null)
          return
        }
        pending = next.value
      }
      if (pending.paced) {
        const wait = startedAt + pacedSent * intervalMs - performance.now()
        if (wait > 0) {
          timer = setTimeout(pump, wait)
          return
        }
        pacedSent += 1
      }
      const more = stream.push(pending.text)
      pending = undefined
      if (!more) {
        waiting = true
        return
      }
    }
  }

  if (signal.aborted) {
    stream.destroy()
    return stream
  }
  signal.addEventListener('abort', onAbort, { once: true })
  pump()
  return stream
}
