// The upstream body as every HTTP adapter (openai, anthropic, gemini) hands it on: the idle
// watchdog enforces the idle timeout, transport errors become GatewayErrors, and destroying
// it (the relay does when the client leaves, or the call's signal fires) frees the socket.
import type { IncomingMessage } from 'node:http'
import { IdleWatchdog } from './idle-watchdog.ts'
import { midBodyError } from './transport-errors.ts'

export function watchBody(response: IncomingMessage, idleMs: number, signal: AbortSignal): IdleWatchdog {
  const body = new IdleWatchdog(idleMs)
  // The consumer attaches its own listeners when it reads; an error before then (an idle
  // timeout on a body nobody reads yet) must not take the process down.
  body.on('error', () => undefined)
  const onAbort = (): void => {
    body.destroy()
  }
  signal.addEventListener('abort', onAbort, { once: true })
  response.on('error', (err) => body.destroy(midBodyError(err)))
  response.on('close', () => {
    if (!response.complete) body.destroy(midBodyError(new Error('premature close')))
  })
  body.on('close', () => {
    signal.removeEventListener('abort', onAbort)
    if (!response.complete) response.destroy()
  })
  response.pipe(body)
  return body
}
