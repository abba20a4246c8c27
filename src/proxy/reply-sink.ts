// Where the relay writes a reply: the part of a ServerResponse it uses. A live client's
// ServerResponse is one; a RecordingSink (recorder.ts) is another, for a stored request
// that a queue worker runs with nobody connected.
export interface ReplySink {
  readonly headersSent: boolean
  statusCode: number
  setHeader(name: string, value: number | string | readonly string[]): unknown
  hasHeader(name: string): boolean
  flushHeaders(): void
  /** False when the reader is behind: wait for 'drain'. */
  write(chunk: Buffer | string): boolean
  end(chunk?: Buffer | string): unknown
  /** Gives up on the reply: a live client sees its connection cut. */
  destroy(): unknown
  readonly writableEnded: boolean
  /** True once end() has delivered everything. */
  readonly writableFinished: boolean
  readonly destroyed: boolean
  /** The connection, where there is one: SSE switches Nagle off on it. */
  readonly socket?: { setNoDelay(noDelay?: boolean): unknown } | null
  on(event: 'close' | 'drain', listener: () => void): unknown
  once(event: 'close' | 'drain', listener: () => void): unknown
  off(event: 'close' | 'drain', listener: () => void): unknown
}
