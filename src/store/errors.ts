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
}
