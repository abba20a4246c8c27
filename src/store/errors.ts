// The two failures a store reports on purpose, so the HTTP layer can answer them
// deliberately (a 409, or `store_unavailable`) instead of as internal errors.

/**
 * The write would break a uniqueness rule (an id, a key hash or an object's owner is
 * taken), or could not be applied because the same record kept changing underneath it.
 */
export class StoreConflictError extends Error {
  override readonly name = 'StoreConflictError'
}

/** The store did not answer (connection refused or lost, command timed out). */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError'
  /** The client's own error: its message is already part of this one's. */
  declare readonly reason: unknown
  /**
   * Nothing was sent: there was no connection to send it on, so the write certainly had
   * no effect. Otherwise it may have run, its reply lost (a timeout, a connection dropped
   * while it was in flight).
   */
  readonly unsent: boolean

  constructor(message: string, options: { readonly cause?: unknown; readonly unsent?: boolean } = {}) {
    // Not passed on as `cause`: the logger appends a cause's message to the error's, and
    // this message already says it ("Redis did not answer: X: X" otherwise).
    // Not enumerable either, for the same reason (the logger would print its stack).
    super(message)
    Object.defineProperty(this, 'reason', { value: options.cause, enumerable: false })
    this.unsent = options.unsent ?? false
  }
}
